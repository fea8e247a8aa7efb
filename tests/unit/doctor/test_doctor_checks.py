"""The doctor's pure part (shared/doctor): the exit-code rule, the deployment's names, the
largest planned layer, and the check branches the hand-written projects do not reach (denied
reads, warnings, the local stack's variants, the graph table's three states), table-driven."""

from __future__ import annotations

import dataclasses

import pytest

from shared.config.config_files import load_config
from shared.doctor import checks as c
from shared.doctor import needs
from shared.doctor.deployment import common_name_of, deployment_of
from shared.doctor.facts import Denied
from shared.doctor.verdicts import CheckResult, Verdict, blocks_start, exit_code
from tests.builders.fixture_http import CONFIG
from tests.builders.stored_runs import DEMO

P, F, W, S, U = Verdict.PASS, Verdict.FAIL, Verdict.WARN, Verdict.SKIP, Verdict.UNREACHABLE


def results(*verdicts: Verdict) -> list[CheckResult]:
    return [CheckResult(f"c{i}", "t", v, "d") for i, v in enumerate(verdicts)]


@pytest.mark.parametrize(
    ("verdicts", "code", "blocks"),
    [
        ((P, P, S), 0, False),
        ((), 0, False),
        ((P, W), 1, False),
        ((P, F), 1, True),
        ((F, U), 3, True),
        ((P, U, S), 3, False),
    ],
)
def test_exit_code_rule(verdicts, code, blocks):
    assert exit_code(results(*verdicts)) == code
    assert blocks_start(results(*verdicts)) is blocks


@pytest.fixture(scope="module")
def cfg():
    return load_config(CONFIG)


@pytest.fixture(scope="module")
def dep(cfg):
    return deployment_of(cfg)


def test_deployment_names_follow_terraform(cfg, dep):
    assert common_name_of(cfg) == "cave-pipeline"
    assert dep.sink == "cave-pipeline-job-events" and dep.scheduler_job == "cave-pipeline-tick"
    assert dep.email("invoker") == "cave-pipeline-invoker@lab-proj.iam.gserviceaccount.com"
    assert dep.workload_identity_member == (
        "serviceAccount:lab-proj.svc.id.goog[pipeline/pipeline-worker]"
    )
    assert dep.trigger_subscriptions()["ticks-trigger"] == "on-tick"
    other = deployment_of(cfg, "lab")
    assert other.cluster == "lab" and other.email("controller").startswith("lab-controller@")


def test_largest_layer_is_ramp_max_times_its_vcpu(cfg):
    planned, need = needs.planned_vcpus(cfg)
    # layer 2: 8x8x2 = 128 batches of 1 chunk; ramp.max 50 pods of 1 vCPU
    assert (need.stage, need.layer, need.pods, need.vcpu_per_pod) == ("ingest", 2, 50, 1.0)
    assert planned == 50.0
    capped = cfg.model_copy(
        update={"controller": cfg.controller.model_copy(update={"max_vcpus": 12.0})}
    )
    assert needs.planned_vcpus(capped)[0] == 12.0


def test_a_small_layer_runs_fewer_pods_than_ramp_max():
    demo = load_config(DEMO)
    planned, need = needs.planned_vcpus(demo)
    assert need.pods <= demo.job.ramp.max and planned == need.pods * need.vcpu_per_pod


def quota(free_pre: float, limit_pre: float = 100, cpus: float = 24) -> dict:
    return {
        "quotas": [
            {"metric": "CPUS", "limit": cpus, "usage": 0},
            {"metric": "PREEMPTIBLE_CPUS", "limit": limit_pre, "usage": limit_pre - free_pre},
        ]
    }


def need(vcpus: int, spot: bool = True) -> needs.LayerNeed:
    return needs.LayerNeed("ingest", 2, vcpus, 1.0, spot)


@pytest.mark.parametrize(
    ("region", "layer", "verdict", "metric"),
    [
        (quota(100), need(50), P, "PREEMPTIBLE_CPUS"),
        (quota(60), need(50), W, "PREEMPTIBLE_CPUS"),  # over 80 % of what is free
        (quota(40), need(50), F, "PREEMPTIBLE_CPUS"),
        (quota(0, limit_pre=0, cpus=24), need(20), W, "CPUS"),  # no Spot quota: CPUS is used
        (quota(100, cpus=10), need(20, spot=False), F, "CPUS"),
    ],
)
def test_spot_quota(dep, region, layer, verdict, metric):
    got, detail, fix = c.check_spot_quota(
        {"region": region, "need": layer, "planned": float(layer.vcpus)}, dep
    )
    assert got is verdict and metric in detail
    assert (fix != "") is (verdict is not P)


def test_graph_table_states(dep):
    absent = c.check_graph_table({"exists": False}, dep)
    assert absent[0] is P and "absent" in absent[1]
    ours = c.check_graph_table(
        {"exists": True, "meta": "ours", "meta_detail": "grid", "mismatch": ""}, dep
    )
    assert ours[0] is P and "with graph metadata" in ours[1]
    other = c.check_graph_table({"exists": True, "meta": "other", "meta_detail": "x"}, dep)
    assert other[0] is P
    bare = c.check_graph_table({"exists": True, "meta": "none", "image_ingest": False}, dep)
    assert bare[0] is P and "setup pass writes it" in bare[1]
    half = c.check_graph_table({"exists": True, "meta": "none", "image_ingest": True}, dep)
    assert half[0] is W and "deletetable fly_v31" in half[2]
    wrong = c.check_graph_table({"exists": True, "meta": "ours", "mismatch": "grid 1 vs 2"}, dep)
    assert wrong[0] is F and "deletetable" in wrong[2]
    denied = c.check_graph_table({"exists": Denied("GET t", "no")}, dep)
    assert denied[0] is F and "bigtable.viewer" in denied[2]


def test_stage_tables_missing_fail_naming_them_and_pipeline_setup(dep):
    """The tables the stages write besides the graph's (the demo's passes): each missing one
    is named with its stage, and the fix is `pipeline setup`."""
    dep = dataclasses.replace(dep, stage_tables=(("l2cache", "g-l2cache"), ("meshing", "g-meshes")))
    absent = {"exists": False}
    none = c.check_graph_table({**absent, "stage_tables": {"g-l2cache": False}}, dep)
    assert none[0] is F and "missing: g-l2cache (l2cache), g-meshes (meshing)" in none[1]
    assert "table fly_v31 absent" in none[1] and "pipeline setup" in none[2]
    all_there = {"g-l2cache": True, "g-meshes": True}
    ok = c.check_graph_table({**absent, "stage_tables": all_there}, dep)
    assert ok[0] is P and "g-l2cache (l2cache), g-meshes (meshing) exist" in ok[1]
    wrong = {"exists": True, "meta": "ours", "mismatch": "grid 1 vs 2"}
    both = c.check_graph_table({**wrong, "stage_tables": {"g-l2cache": True}}, dep)
    assert both[0] is F and "deletetable" in both[2] and "pipeline setup" in both[2]
    denied = c.check_graph_table({**absent, "stage_tables": {"g-meshes": Denied("GET t")}}, dep)
    assert denied[0] is F and "bigtable.viewer" in denied[2]


@pytest.mark.parametrize(
    ("check", "facts", "role"),
    [
        (c.check_apis, {"states": Denied("GET services")}, "serviceUsageViewer"),
        (c.check_firestore, {"database": Denied("GET db")}, "datastore.viewer"),
        (c.check_log_sink, {"sink": Denied("GET sink")}, "logging.viewer"),
        (c.check_scheduler, {"job": Denied("GET job")}, "cloudscheduler.viewer"),
        (c.check_functions, {"functions": {"on-tick": Denied("GET fn")}}, "cloudfunctions"),
        (c.check_bigtable_instance, {"instance": Denied("GET i")}, "bigtable.viewer"),
        (c.check_service_accounts, {"accounts": {"worker": Denied("GET sa")}}, "iam."),
        (c.check_workload_identity, {"worker_policy": Denied("POST p")}, "iam."),
        (c.check_cluster, {"cluster": Denied("GET cluster")}, "clusterViewer"),
        (c.check_spot_quota, {"region": Denied("GET r"), "need": None, "planned": 1}, "compute"),
    ],
)
def test_a_denied_read_fails_naming_the_role_that_reads_it(dep, check, facts, role):
    verdict, detail, fix = check(facts, dep)
    assert verdict is F and "permission denied" in detail and role in fix


def test_local_stack_variants(dep):
    topics = {"kick": {"name": "projects/p/topics/kick"}}
    ok = c.check_pubsub({"local": True, "topics": topics, "subscriptions": {}}, dep)
    assert ok[0] is P
    gone = c.check_pubsub({"local": True, "topics": {"kick": None}, "subscriptions": {}}, dep)
    assert gone[0] is F and "pipeline local up" in gone[2]
    assert c.check_firestore({"local": True, "address": "127.0.0.1:1"}, dep)[0] is P
    assert c.check_bigtable_instance({"local": True}, dep)[0] is S


def test_namespace_and_rbac_skip_when_the_cluster_was_not_reached(dep):
    assert c.check_namespace({"namespace": "unreached"}, dep)[0] is S
    assert c.check_namespace({"namespace": Denied("GET ns")}, dep)[0] is S
    assert c.check_rbac({"operator": "unreached"}, dep)[0] is S


def test_rbac_names_the_controllers_missing_verbs(dep):
    verdict, detail, fix = c.check_rbac(
        {"operator": {"list pods": True}, "controller": {"create jobs.batch": False}}, dep
    )
    assert verdict is F and "cave-pipeline-controller@" in detail and "create jobs" in detail
    ok = c.check_rbac({"operator": {"list pods": True}, "controller": Denied("SAR")}, dep)
    assert ok[0] is P and "not checked" in ok[1]


def test_images_and_paths_that_cannot_be_looked_up(dep):
    unknown = [{"stage": "ingest", "ref": "quay.io/x:1", "found": None, "why": "not looked up"}]
    assert c.check_images({"images": unknown}, dep)[0] is W
    assert c.check_images({"images": []}, dep)[0] is S
    skipped = [{"key": "k", "url": "s3://b/p", "readable": None, "why": "not read"}]
    assert c.check_data_paths({"paths": skipped}, dep)[0] is S


def test_an_empty_watershed_fails_with_where_to_set_it(dep):
    facts = {"paths": [], "empty": ["data_source.watershed"], "empty_fix": "set it in ds.yml"}
    verdict, detail, fix = c.check_data_paths(facts, dep)
    assert verdict is F and "data_source.watershed empty" in detail and fix == "set it in ds.yml"


def test_empty_inputs_are_the_required_keys_left_blank():
    cfg = load_config(DEMO)  # examples/demo leaves the watershed to `pipeline demo`
    assert needs.empty_inputs(cfg) == ["data_source.watershed"]
    assert "examples/demo/dataset.yml" in needs.empty_input_fix(cfg)
    source = cfg.ds.data_source.model_copy(update={"watershed": "gs://b/ws"})
    given = cfg.model_copy(
        update={"dataset_config": cfg.ds.model_copy(update={"data_source": source})}
    )
    assert needs.empty_inputs(given) == []


def test_cluster_without_a_dns_endpoint_fails_with_the_command_that_opens_it(dep):
    cluster = {"status": "RUNNING", "controlPlaneEndpointsConfig": {"dnsEndpointConfig": {}}}
    verdict, _, fix = c.check_cluster({"cluster": cluster}, dep)
    assert verdict is F and "--enable-dns-access" in fix


def test_select_checks():
    assert [x.id for x in c.select(["apis", "images"])] == ["apis", "images"]
    cheap = {x.id for x in c.select(cheap_only=True)}
    assert "firestore" in cheap and "images" not in cheap
    with pytest.raises(ValueError, match="unknown check"):
        c.select(["nope"])
