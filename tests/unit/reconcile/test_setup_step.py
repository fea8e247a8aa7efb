"""Setup passes: each stage's setup command, its one-pod Job, and the decision that runs it
before the stage's first layer and checks the graph metadata it reports."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from shared.config.config_files import load_config
from shared.config.stage_selection import setup_command
from shared.jobs.setup_job import (
    dataset_config_map_manifest,
    pcg_dataset,
    render_setup_job,
    setup_job_name,
)
from shared.model.graph_meta import GraphMeta, report_line
from shared.model.stages import SetupConfigError
from shared.model.state import SETUP_LAYER, SetupState
from shared.operate.operator_actions import resubmit
from shared.ports.cluster import JobStatus
from shared.ports.graph_table import GraphTable, TableState
from shared.reconcile.build_plan import new_run, plan_for, setup_plan
from shared.reconcile.decide import decide, reject
from shared.reconcile.decision import Alert, CreateJob, Snapshot
from shared.reconcile.ownership import RUN_ID

ROOT = Path(__file__).resolve().parents[3]
DEMO = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PCG = "python -m pychunkedgraph.pipeline"


def pcg_cfg(**dataset):
    """The demo config run by PyChunkedGraph images' entry points (the predecessor's shape)."""
    commands = {
        "ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"],
        "meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"],
        "l2cache": ["python", "-m", "pcgl2cache.pipeline.l2cache"],
        "migrate": ["python", "-m", "pychunkedgraph.pipeline.migrate"],
        "migrate_cleanup": ["python", "-m", "pychunkedgraph.pipeline.migrate", "--clean"],
    }
    ds = DEMO.ds.model_copy(update=dataset)
    return DEMO.model_copy(update={"commands": commands, "workloads": {}, "dataset_config": ds})


@pytest.mark.parametrize(
    ("stage", "dataset", "exist_ok", "want"),
    [
        ("ingest", {}, False, f"{PCG}.ingest.setup demo"),
        ("ingest", {"ingest_config": {"AGGLOMERATION": "gs://a"}}, False,
         f"{PCG}.ingest.setup demo --raw"),
        ("ingest", {}, True, f"{PCG}.ingest.setup demo --exist-ok"),
        ("meshing", {}, False, f"{PCG}.meshing.setup demo"),
        ("migrate", {}, False, f"{PCG}.migrate.setup demo"),
        ("migrate_cleanup", {}, False, f"{PCG}.migrate.setup demo"),
        ("l2cache", {"l2cache_config": {"table_id": "t", "cv_path": "gs://cv"}}, False,
         "python -m pcgl2cache.pipeline.l2cache.setup t demo gs://cv"),
        ("l2cache", {"l2cache_config": {"table_id": "t", "cv_path": "gs://cv", "cave_host": "h",
                                        "cave_dataset": "d", "cave_service": "s"}}, False,
         "python -m pcgl2cache.pipeline.l2cache.setup t demo gs://cv --cave-host h "
         "--cave-dataset d --cave-service s"),
        # cave_config registers the same mapping first: the L2 cache setup is not asked to
        # again (middle_auth answers a second POST 422, and PCGL2Cache's setup raises on it)
        ("l2cache", {"l2cache_config": {"table_id": "t", "cv_path": "gs://cv", "cave_host": "h/",
                                        "cave_dataset": "d", "cave_service": "s"},
                     "cave_config": {"host": "h", "dataset": "d", "service": "s"}}, False,
         "python -m pcgl2cache.pipeline.l2cache.setup t demo gs://cv"),
        # another host or service is another mapping: the setup registers its own
        ("l2cache", {"l2cache_config": {"table_id": "t", "cv_path": "gs://cv", "cave_host": "h",
                                        "cave_dataset": "d", "cave_service": "s"},
                     "cave_config": {"host": "h", "dataset": "d"}}, False,
         "python -m pcgl2cache.pipeline.l2cache.setup t demo gs://cv --cave-host h "
         "--cave-dataset d --cave-service s"),
        ("l2cache", {"l2cache_config": {"table_id": "t", "cv_path": "gs://cv", "cave_host": "h",
                                        "cave_dataset": "d", "cave_service": "s"},
                     "cave_config": {"host": "other", "dataset": "d", "service": "s"}}, False,
         "python -m pcgl2cache.pipeline.l2cache.setup t demo gs://cv --cave-host h "
         "--cave-dataset d --cave-service s"),
    ],
)  # fmt: skip
def test_the_images_setup_commands_are_the_predecessors(stage, dataset, exist_ok, want):
    assert " ".join(setup_command(pcg_cfg(**dataset), stage, exist_ok)) == want


def test_two_datasets_for_one_cave_mapping_are_refused_naming_both():
    cfg = pcg_cfg(
        l2cache_config={"table_id": "t", "cv_path": "gs://cv", "cave_host": "h",
                        "cave_dataset": "d2", "cave_service": "pychunkedgraph"},
        cave_config={"host": "h", "dataset": "d1"},
    )  # fmt: skip
    with pytest.raises(SetupConfigError, match="'d1' and l2cache_config.cave_dataset 'd2'"):
        setup_command(cfg, "l2cache")


def test_setup_commands_of_worker_stages_and_overrides():
    assert setup_command(DEMO, "ingest") == ["python", "-m", "worker.setup"]
    cfg = DEMO.model_copy(update={"commands": {"ingest_setup": ["x", "y"], "meshing_setup": []}})
    assert setup_command(cfg, "ingest") == ["x", "y"]
    assert setup_command(cfg, "meshing") is None  # turned off
    with pytest.raises(SetupConfigError, match="l2cache_config.*table_id and cv_path"):
        setup_command(pcg_cfg(l2cache_config={"table_id": "t"}), "l2cache")


def test_setup_override_key_is_accepted_by_the_config(tmp_path):
    raw = yaml.safe_load((ROOT / "examples" / "demo" / "pipeline.yml").read_text())
    raw["commands"] = {"ingest_setup": ["python", "-m", "demo.setup"]}
    raw["dataset"] = str(ROOT / "examples" / "demo" / "dataset.yml")
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    assert load_config(tmp_path / "p.yml").commands["ingest_setup"][-1] == "demo.setup"


def env_of(manifest):
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


def test_the_setup_job_is_one_pod_with_the_mounts_and_the_planned_grid():
    cfg = DEMO.model_copy(update={"secret_files": {"google-secret.json": "key.json"}})
    m = render_setup_job(cfg, "ingest", run_id="r1")
    kubernetes_validate.validate(m, "1.33", strict=True)
    spec = m["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimitPerIndex"]) == (1, 1, 0)
    assert m["metadata"]["name"] == setup_job_name("demo", "ingest", "r1")
    pod = spec["template"]["spec"]
    assert pod["containers"][0]["command"] == ["python", "-m", "worker.setup"]
    assert pod["serviceAccountName"] == "pipeline-setup"  # may create the graph's table
    mounts = {v["mountPath"] for v in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"/home/worker/.cloudvolume/secrets", "/app/datasets/dataset.yml"}
    assert {v["name"]: v.get("secret", v.get("configMap"))["optional"] for v in pod["volumes"]}
    env = env_of(m)
    assert env["PCG_GRID_SHAPE"] == ",".join(map(str, DEMO.layer2_shape()))
    assert env["PCG_WORKLOAD"] == "demo.ingest:process_chunk"
    assert env["PCG_DATASET"] == "/app/datasets/dataset.yml"
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == (
        "/home/worker/.cloudvolume/secrets/google-secret.json"
    )
    plain = env_of(render_setup_job(DEMO, "ingest", run_id="r1"))
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in plain
    # A re-submitted setup is a new Job.
    assert (
        render_setup_job(DEMO, "ingest", run_id="r1", attempt=1)["metadata"]["name"]
        != (m["metadata"]["name"])
    )


def test_l2cache_pods_get_their_target_from_l2cache_config():
    from shared.jobs.manifest import render_job

    ds = DEMO.ds.model_copy(update={"l2cache_config": {"table_id": "t", "cv_path": "gs://cv"}})
    cfg = DEMO.model_copy(update={"dataset_config": ds})
    env = env_of(render_job(cfg, "l2cache", 2, run_id="r1", parallelism=1))
    assert (env["L2CACHE_CV_PATH"], env["L2CACHE_TABLE_ID"]) == ("gs://cv", "t")
    ingest = env_of(render_job(cfg, "ingest", 2, run_id="r1", parallelism=1))
    assert "L2CACHE_TABLE_ID" not in ingest


def test_the_dataset_config_map_is_in_pychunkedgraphs_shape():
    source = DEMO.ds.data_source.model_copy(update={"watershed": "gs://b/ws"})
    ds = DEMO.ds.model_copy(update={"data_source": source})
    cfg = DEMO.model_copy(update={"dataset_config": ds})
    cm = dataset_config_map_manifest(cfg, "r1")
    kubernetes_validate.validate(cm, "1.33", strict=True)
    data = yaml.safe_load(cm["data"]["dataset.yml"])
    assert data["data_source"] == {"WATERSHED": "gs://b/ws"}  # no `size`: PCG has none
    assert data["graph_config"]["CHUNK_SIZE"] == list(DEMO.ds.graph_config.CHUNK_SIZE)
    worker_pod = render_setup_job(DEMO, "ingest", run_id="r1")["spec"]["template"]["spec"]
    assert {v["configMap"]["name"] for v in worker_pod["volumes"] if "configMap" in v} == {
        cm["metadata"]["name"]
    }
    assert pcg_dataset({"data_source": {"edges": "", "watershed": "w", "CV_MIP": 1}}) == {
        "data_source": {"WATERSHED": "w", "CV_MIP": 1}
    }


# ---- the decision -------------------------------------------------------------------------


def fresh_run():
    return new_run(DEMO, "r1", ["ingest"], "auto", T0)


def done_job(name, condition="Complete", reason=None):
    return JobStatus(name, {}, {}, 1, 1, False, condition=condition, reason=reason)


# The graph's table as a PyChunkedGraph image leaves it: metadata this project cannot decode,
# so a completed setup is judged by its log's report, if any.
SET_UP = GraphTable("demo", TableState.METADATA)


def step(run, jobs=None, logs=None, table=SET_UP):
    plan = plan_for(DEMO, run, table)
    seen = Snapshot(run, jobs or {}, {}, setup_logs=logs or {}, graph_table=table)
    return decide(seen, plan, None, T0)


def creates(d):
    return [(a.stage, a.layer) for a in d.actions if isinstance(a, CreateJob)]


def meta_line(size):
    from shared.model.layers import layer_count

    chunk = tuple(DEMO.ds.graph_config.CHUNK_SIZE)
    layers = layer_count(tuple(-(-s // c) for s, c in zip(size, chunk, strict=True)))
    return report_line(GraphMeta((0, 0, 0), size, chunk, layers))


def test_the_setup_runs_before_layer_2_and_gates_it():
    run = fresh_run()
    assert set(run.setups) == {"ingest"}
    d = step(run)
    assert creates(d) == [("ingest", 0)]  # the setup Job, not layer 2
    name = d.state.setups["ingest"].job_name
    assert d.state.setups["ingest"].phase == "running"
    d = step(d.state, {name: None})  # still running: nothing new (the Job is re-created)
    assert creates(d) == [("ingest", 0)]
    d = step(d.state, {name: done_job(name, None)})
    assert creates(d) == [] and d.state.layers["ingest-L2"].phase == "waiting"
    size = tuple(DEMO.ds.data_source.size)
    d = step(d.state, {name: done_job(name)}, {name: "noise\n" + meta_line(size)})
    assert d.state.setups["ingest"].phase == "succeeded"
    assert creates(d) == [("ingest", 2)]


def test_graph_metadata_for_another_grid_refuses_the_stage_with_both_numbers():
    d = step(fresh_run())
    name = d.state.setups["ingest"].job_name
    wrong = tuple(2 * s for s in DEMO.ds.data_source.size)
    d = step(d.state, {name: done_job(name)}, {name: meta_line(wrong)})
    setup = d.state.setups["ingest"]
    assert setup.phase == "failed" and creates(d) == []
    l2 = list(DEMO.layer2_shape())
    assert f"{[2 * v for v in l2]}" in setup.failure_reason
    assert f"{l2} planned" in setup.failure_reason
    alerts = [(a.kind, a.stage, a.details["job"]) for a in d.actions if isinstance(a, Alert)]
    assert alerts == [("setup_failed", "ingest", name)]
    assert step(d.state).actions == []  # layer 2 never starts; the alert is not repeated


def test_a_failed_setup_pod_fails_the_stage_and_a_resubmit_runs_a_new_job():
    d = step(fresh_run())
    name = d.state.setups["ingest"].job_name
    d = step(d.state, {name: done_job(name, "Failed", "FailedIndexes")})
    assert d.state.setups["ingest"].phase == "failed"
    assert "FailedIndexes" in d.state.setups["ingest"].failure_reason
    assert [a.kind for a in d.actions if isinstance(a, Alert)] == ["setup_failed"]
    run = d.state
    resubmit(run, "ingest", 0, "op", T0)
    d = step(run)
    assert creates(d) == [("ingest", 0)]
    assert d.state.setups["ingest"].job_name == setup_job_name("demo", "ingest", "r1", 1)
    manifest = plan_for(DEMO, run).setups["ingest"].manifest
    # the worker's setup has no such flag
    assert "--exist-ok" not in manifest["spec"]["template"]["spec"]["containers"][0]["command"]


def test_a_setup_with_no_report_succeeds_on_completion():
    d = step(fresh_run())
    name = d.state.setups["ingest"].job_name
    d = step(d.state, {name: done_job(name)}, {name: "PyChunkedGraph prints no metadata"})
    assert d.state.setups["ingest"].phase == "succeeded"


def test_a_refused_setup_manifest_fails_the_setup():
    d = step(fresh_run())
    name = d.state.setups["ingest"].job_name
    d = reject(d, {name: "no such image"})
    assert d.state.setups["ingest"].phase == "failed"
    assert d.state.setups["ingest"].failure_reason == "rejected: no such image"
    assert [a.kind for a in d.actions if isinstance(a, Alert)] == ["setup_failed"]


def test_dependent_stages_run_their_setup_after_the_stages_they_wait_for():
    run = new_run(DEMO, "r1", ["ingest", "meshing"], "auto", T0)
    assert creates(step(run)) == [("ingest", 0)]
    run.setups["ingest"].phase = "succeeded"
    for ls in run.layers.values():
        if ls.stage == "ingest":
            ls.phase = "succeeded"
    assert creates(step(run)) == [("meshing", 0)]


def test_setups_survive_the_stored_document():
    from shared.model.state import RunState

    d = step(fresh_run())
    back = RunState.from_docs(d.state.run_doc(), [ls.to_doc() for ls in d.state.layers.values()])
    assert back.setups == d.state.setups


def test_status_shows_layer_2_waiting_on_the_setup():
    from shared.views.progress import waits_on

    d = step(fresh_run())
    assert waits_on(d.state, d.state.layers["ingest-L2"]) == "ingest setup (running)"
    name = d.state.setups["ingest"].job_name
    d = step(d.state, {name: done_job(name, "Failed")})
    assert waits_on(d.state, d.state.layers["ingest-L2"]) == (
        "ingest setup (failed: pipeline inspect r1 ingest 0)"
    )
    assert waits_on(d.state, d.state.layers["ingest-L3"]) == "ingest-L2 (waiting)"


def test_validate_refuses_a_setup_that_cannot_be_rendered():
    from shared.jobs.manifest import ManifestError
    from shared.jobs.render_check import validate_config_renders

    validate_config_renders(DEMO)
    cfg = pcg_cfg(l2cache_config={"table_id": "t"})  # no cv_path for the l2cache setup
    cfg = cfg.model_copy(update={"images": {**cfg.images, "l2cache": "img"}})
    with pytest.raises(ManifestError, match="setup of stage l2cache.*cv_path"):
        validate_config_renders(cfg)


# Behaviour of a setup pass's plan and step that the mutation run of the final tree found
# unchecked: the plan keeps the grid and renders the Job of the current attempt while it may be
# created, and says why when it cannot.


@pytest.mark.parametrize(
    ("phase", "rendered"),
    [("waiting", True), ("running", True), ("succeeded", False), ("failed", False)],
)
@pytest.mark.parametrize("attempt", [0, 2])
def test_the_plan_renders_the_current_attempts_job_while_it_may_be_created(
    phase, rendered, attempt
):
    setup = SetupState(stage="ingest", phase=phase, attempt=attempt)
    plan = setup_plan(DEMO, "r1", setup)
    assert plan.job_name == setup_job_name(DEMO.graph_id, "ingest", "r1", attempt)
    assert (plan.manifest is not None) == rendered and plan.refusal == ""
    if rendered:  # the Job of this attempt, not of the first
        assert plan.manifest["metadata"]["name"] == plan.job_name
    # whatever the phase, the grid the setup's metadata is checked against
    assert plan.layer2_shape == DEMO.layer2_shape() and plan.layer_count == 5


def test_a_setup_job_that_cannot_render_is_refused_saying_why():
    bad = DEMO.model_copy(update={"namespace": "Not_A_Label"})
    plan = setup_plan(bad, "r1", SetupState(stage="ingest"))
    assert plan.manifest is None and "namespace" in plan.refusal
    assert plan.job_name == setup_job_name(DEMO.graph_id, "ingest", "r1", 0)
    assert (plan.layer2_shape, plan.layer_count) == (DEMO.layer2_shape(), 5)


def test_the_plan_carries_the_projects_vcpu_cap():
    capped = DEMO.model_copy(
        update={"controller": DEMO.controller.model_copy(update={"max_vcpus": 12.5})}
    )
    run = new_run(capped, "r1", ["ingest"], "auto", T0)
    assert plan_for(capped, run).max_vcpus == 12.5
    assert plan_for(DEMO, new_run(DEMO, "r1", ["ingest"], "auto", T0)).max_vcpus is None


def test_a_stages_first_layer_is_ready_when_its_setup_succeeded():
    run = new_run(DEMO, "r1", ["ingest"], "auto", T0)
    l2, setup = run.layers["ingest-L2"], run.setups["ingest"]
    assert run.ready_since(l2) is None  # the setup has not run
    setup.phase, setup.finished_at = "running", WHEN
    assert run.ready_since(l2) is None
    setup.phase = "succeeded"
    assert run.ready_since(l2) == WHEN  # not the run's creation


def test_a_new_run_has_one_waiting_setup_per_stage_with_one():
    run = new_run(DEMO, "r1", ["ingest"], "auto", T0)
    assert {s: (st.phase, st.attempt, st.earlier_s) for s, st in run.setups.items()} == {
        "ingest": ("waiting", 0, 0.0)
    }


WHEN = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)  # the reconcile's clock


def job(name: str, condition: str | None = "Complete", annotations=None, **kw) -> JobStatus:
    return JobStatus(name, {}, annotations or {}, 1, 1, False, condition=condition, **kw)


def step_when(run, jobs=None, logs=None, table=SET_UP):
    plan = plan_for(DEMO, run, table)
    seen = Snapshot(run, jobs or {}, {}, setup_logs=logs or {}, graph_table=table)
    return decide(seen, plan, None, WHEN)


def started():
    d = step_when(new_run(DEMO, "r1", ["ingest"], "auto", T0))
    return d.state, d.state.setups["ingest"].job_name, d


def test_the_setup_job_is_created_one_pod_wide_and_again_if_it_went_missing():
    run, name, d = started()
    want = [CreateJob("ingest", SETUP_LAYER, name, 1)]
    assert [a for a in d.actions if isinstance(a, CreateJob)] == want
    assert run.setups["ingest"].started_at == WHEN
    again = step_when(run, {name: None})  # committed, never created (or deleted by hand)
    assert [a for a in again.actions if isinstance(a, CreateJob)] == want


@pytest.mark.parametrize(
    ("observed", "log", "phase", "reason"),
    [
        # no log at all (an image's setup prints no metadata): it succeeded, at its Job's time
        (job("N", completion_time=T0), None, "succeeded", ""),
        (job("N", completion_time=T0), "no report here", "succeeded", ""),
        (job("N", "Failed"), "", "failed", "the setup pod failed (Failed)"),
        (job("N", "Failed", reason="DeadlineExceeded"), "", "failed", "(DeadlineExceeded)"),
        (job("N", completion_time=T0), '{"graph_meta": 7}', "failed", "malformed graph metadata"),
        # a Job under the planned name marked as another run's is never adopted
        (job("N", completion_time=T0, annotations={RUN_ID: "someone-else"}), "", "failed",
         "belongs to"),
    ],
)  # fmt: skip
def test_a_finished_setup_job_decides_the_step(observed, log, phase, reason):
    run, name, _ = started()
    seen = replace(observed, name=name)
    d = step_when(run, {name: seen}, {} if log is None else {name: log})
    setup = d.state.setups["ingest"]
    assert setup.phase == phase and reason in setup.failure_reason
    alerts = [a for a in d.actions if isinstance(a, Alert)]
    if phase == "succeeded":
        assert setup.finished_at == T0 and not alerts  # the Job's completion time
        return
    assert setup.finished_at == WHEN
    fix = f"fix the cause, then `pipeline submit r1 ingest {SETUP_LAYER}`"
    assert alerts == [
        Alert(
            "setup_failed",
            "ingest",
            SETUP_LAYER,
            {"reason": setup.failure_reason, "job": name, "fix": fix},
        )
    ]
