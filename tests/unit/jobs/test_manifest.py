"""The Job manifest: every render is valid against the Kubernetes 1.33 schema (strict).

kubernetes-validate ships the 1.33 schema (checked: its `utils.all_versions()` lists 1.25 to
1.37), so the target version (docs/job-and-worker-contract.md#the-job) is used as is.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import kubernetes_validate
import pytest

from shared.config.config import ConfigError, PipelineConfig
from shared.jobs.layer_spec import MAX_JOB_NAME, job_name
from shared.jobs.manifest import ManifestError, label_value, render_job
from shared.jobs.render_check import implied_renders, validate_config_renders
from tests.builders.toy_jobs import IMAGE, env_of, make_config, pod_spec
from tests.builders.toy_jobs import merge as _merge

K8S_VERSION = "1.33"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def requests_of(manifest: dict) -> dict[str, str]:
    return pod_spec(manifest)["containers"][0]["resources"]["requests"]


LONG_GRAPH = "a" + "_very-long_graph" * 3 + "x" * 14  # 63 chars, underscores included
CONFIGS = {
    "toy": ({}, {}),
    "long-graph": ({"graph_id": LONG_GRAPH}, {}),
    "balanced-zonal-on-demand": (
        {"zone": "us-east1-b", "job": {"compute_class": "Balanced", "spot": False}},
        {},
    ),
    "everything": (
        {
            "namespace": "pcg",
            "workload_identity": {"ksa": "pcg-worker"},
            "env": {"EXTRA": "x"},
            "commands": {"meshing": ["python", "-m", "pcg.mesh"]},
            "workloads": {"ingest": "worker.workloads.demo:ingest"},
            "job": {
                "processes_per_vcpu": 2,
                "burst": False,
                "resources": {
                    "cpu": {"base": 0.5, "factor": 2, "max": 8},
                    "memory": {"base": 1, "factor": 2},
                    "overrides": {5: {"memory": 20}},
                },
                "workloads": {"meshing": {"batch_size": 4, "compute_class": "Scale-Out"}},
            },
        },
        {"mesh_config": {"max_layer": 4, "some_pcg_key": 1}, "l2cache_config": {"x": 1}},
    ),
    "big-grid": ({"job": {"batch_size": 1}}, {"data_source": {"size": [6400, 3200, 1920]}}),
    "scale-out": ({"job": {"compute_class": "Scale-Out"}}, {}),
}


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("suspend", [False, True])
def test_every_render_is_valid_kubernetes_1_33(tmp_path, name, suspend):
    cfg = make_config(tmp_path, *CONFIGS[name])
    pairs = implied_renders(cfg)
    assert pairs
    for stage, layer in pairs:
        m = render_job(cfg, stage, layer, run_id="run-1", parallelism=50, suspend=suspend)
        kubernetes_validate.validate(m, K8S_VERSION, strict=True)
        spec = m["spec"]
        assert spec["suspend"] is suspend
        assert 1 <= spec["parallelism"] <= spec["completions"]
        assert 0 <= spec["maxFailedIndexes"] <= spec["completions"]
        assert DNS_LABEL.match(m["metadata"]["name"]) and len(m["metadata"]["name"]) <= 63
        for value in m["metadata"]["labels"].values():
            assert LABEL_VALUE.match(value) and len(value) <= 63


def test_the_validator_is_strict():
    bad = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {"oops": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    ("layer", "grid", "batch", "completions"),
    [(2, (8, 6, 3), 15, 10), (3, (4, 3, 2), 7, 4), (4, (2, 2, 1), 3, 2), (5, (1, 1, 1), 1, 1)],
)
def test_completions_follow_the_layer_grid(tmp_path, layer, grid, batch, completions):
    cfg = make_config(tmp_path)
    m = render_job(cfg, "ingest", layer, run_id="r", parallelism=100)
    spec = m["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == completions == math.ceil(math.prod(grid) / batch)
    assert spec["parallelism"] == completions  # clamped
    assert spec["maxFailedIndexes"] == min(10, completions)
    assert spec["backoffLimitPerIndex"] == 3
    env = env_of(m)
    assert env["PCG_GRID_SHAPE"] == ",".join(map(str, grid))
    # The layer's own size, used as is by PyChunkedGraph images
    # (docs/job-and-worker-contract.md#chunk-distribution).
    assert env["PCG_BATCH_SIZE"] == str(batch)
    assert env["PCG_LAYER"] == str(layer) and env["PCG_N_LAYERS"] == "5"
    notes = m["metadata"]["annotations"]
    assert notes["cave-pipeline/chunks"] == str(math.prod(grid))
    assert notes["cave-pipeline/batch-size"] == str(batch)
    assert notes["cave-pipeline/grid-shape"] == env["PCG_GRID_SHAPE"]


@pytest.mark.parametrize("stage", ["ingest", "meshing"])
def test_every_pod_of_every_layer_gets_chunks(tmp_path, stage):
    """The predecessor's harness takes window i = positions [i*B, (i+1)*B) with B =
    PCG_BATCH_SIZE as is: every index below `completions` must own at least one chunk and
    every chunk an index, so completions == ceil(N / PCG_BATCH_SIZE) at every layer."""
    cfg = make_config(
        tmp_path,
        {"job": {"batch_size": 1000, "workloads": {"meshing": {"batch_size": 12}}}},
        {"data_source": {"size": [64 * 64, 64 * 64, 32 * 64]}, "mesh_config": {}},
    )
    for layer in range(2, 9):
        m = render_job(cfg, stage, layer, run_id="r", parallelism=1)
        n, b = (
            int(m["metadata"]["annotations"]["cave-pipeline/chunks"]),
            int(env_of(m)["PCG_BATCH_SIZE"]),
        )
        assert m["spec"]["completions"] == math.ceil(n / b), layer
        assert (m["spec"]["completions"] - 1) * b < n  # the last index is not empty


def test_job_shape(tmp_path):
    m = render_job(make_config(tmp_path), "ingest", 2, run_id="r", parallelism=3)
    spec, pod = m["spec"], pod_spec(m)
    assert spec["parallelism"] == 3
    assert "ttlSecondsAfterFinished" not in spec and "activeDeadlineSeconds" not in spec
    # Workers take over their own index's earlier claims: never two attempts alive at once.
    assert spec["podReplacementPolicy"] == "Failed"
    rules = spec["podFailurePolicy"]["rules"]
    ignore = {"type": "DisruptionTarget", "status": "True"}
    assert {"action": "Ignore", "onPodConditions": [ignore]} in rules
    fail = [r for r in rules if r["action"] == "FailIndex"]
    assert fail == [
        {
            "action": "FailIndex",
            "onExitCodes": {"containerName": "worker", "operator": "In", "values": [42]},
        }
    ]
    assert pod["restartPolicy"] == "Never"
    assert pod["terminationGracePeriodSeconds"] == 25
    assert pod["serviceAccountName"] == "pipeline-worker"
    (container,) = pod["containers"]
    assert container["name"] == "worker" and container["image"] == IMAGE
    assert container["command"] == ["python", "-m", "worker"]
    # Requests without limits: pods may burst into the node's spare capacity.
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1024Mi"}}
    assert m["metadata"]["labels"] == spec["template"]["metadata"]["labels"]
    assert m["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "cave-pipeline",
        "cave-pipeline/run": "r",
        "cave-pipeline/stage": "ingest",
        "cave-pipeline/graph": "toy",
        "cave-pipeline/layer": "2",
    }


@pytest.mark.parametrize(
    ("pipeline", "selector", "tolerated"),
    [
        ({}, {"cloud.google.com/gke-spot": "true"}, True),
        ({"job": {"spot": False}}, None, False),
        (
            {"zone": "us-east1-c", "job": {"compute_class": "Balanced"}},
            {
                "cloud.google.com/gke-spot": "true",
                "cloud.google.com/compute-class": "Balanced",
                "topology.kubernetes.io/zone": "us-east1-c",
            },
            True,
        ),
        (  # the default class is selected by naming none
            {"job": {"compute_class": "general-purpose", "spot": False}},
            None,
            False,
        ),
        (  # node-billed classes are refused at load (tests/unit/config/test_compute_class.py)
            {"job": {"compute_class": "Scale-Out"}},
            {"cloud.google.com/gke-spot": "true", "cloud.google.com/compute-class": "Scale-Out"},
            True,
        ),
    ],
)
def test_scheduling(tmp_path, pipeline, selector, tolerated):
    cfg = make_config(tmp_path, pipeline)
    pod = pod_spec(render_job(cfg, "ingest", 2, run_id="r", parallelism=1))
    assert pod.get("nodeSelector") == selector
    spot_toleration = {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true"}
    spot_toleration["effect"] = "NoSchedule"
    assert (spot_toleration in pod.get("tolerations", [])) is tolerated


def test_env(tmp_path):
    cfg = make_config(tmp_path, *CONFIGS["everything"])
    env = env_of(render_job(cfg, "ingest", 4, run_id="run-7", parallelism=1))
    assert env["PCG_N_PROCESSES"] == "4" and env["EXTRA"] == "x"  # 2 per vCPU x 2 vCPU
    assert env["PCG_WORKLOAD"] == "worker.workloads.demo:ingest"
    assert env["PCG_PERM_SEED"] == "42" and env["PCG_STAGE"] == "ingest"
    assert env["PCG_RUN_ID"] == "run-7" and env["PCG_GRAPH_ID"] == "toy"
    assert (env["BIGTABLE_PROJECT"], env["BIGTABLE_INSTANCE"]) == ("bt-proj", "bt-inst")
    assert env["PCG_LOCK_EXPIRY_S"] == str(180 * 2**2)
    dataset = json.loads(env["PCG_DATASET_JSON"])
    assert dataset["data_source"]["size"] == [512, 384, 192]
    assert dataset["mesh_config"] == {"max_layer": 4, "some_pcg_key": 1}
    # A stage with its own command and no workload: the image's entry point, no plugin.
    own_command = cfg.model_copy(update={"workloads": {"ingest": cfg.workloads["ingest"]}})
    meshing = render_job(own_command, "meshing", 2, run_id="run-7", parallelism=1)
    assert "PCG_WORKLOAD" not in env_of(meshing)
    assert pod_spec(meshing)["containers"][0]["command"] == ["python", "-m", "pcg.mesh"]
    assert env_of(meshing)["PCG_BATCH_SIZE"] == "4"  # the stage's own override


@pytest.mark.parametrize(
    ("job", "processes"),
    [
        # cpu curve 0.5 x 2^(L-2): 0.5, 1, 2, 4 vCPU at layers 2..5 (not packed)
        ({}, {2: 1, 3: 1, 4: 2, 5: 4}),  # the default, 1 per whole vCPU (0.0.4's count)
        ({"processes_per_vcpu": 2}, {2: 1, 3: 2, 4: 4, 5: 8}),  # the predecessor's newest
        ({"processes_per_vcpu": 3}, {2: 1, 3: 3, 4: 6, 5: 12}),
        ({"parallel": False, "processes_per_vcpu": 4}, {2: 1, 3: 1, 4: 1, 5: 1}),
        ({"resources": {"overrides": {4: {"cpu": 1.9}}}}, {2: 1, 3: 1, 4: 2, 5: 4}),  # snapped
        # packed: L4 2 -> 2.75 vCPU (2 whole), L5 4 -> 6.75 (6 whole); L2, L3 are at 8 and 4
        # GiB per vCPU, above the standard shape, so left alone
        ({"resources": {"pack": True}}, {2: 1, 3: 1, 4: 2, 5: 6}),
        ({"resources": {"pack": True}, "processes_per_vcpu": 2}, {2: 1, 3: 2, 4: 4, 5: 12}),
    ],
)
def test_n_processes_per_layer(tmp_path, job, processes):
    resources = {"cpu": {"base": 0.5, "factor": 2}, "memory": {"base": 4}, "pack": False}
    cfg = make_config(tmp_path, {"job": _merge({"resources": resources}, job)})
    for layer, expected in processes.items():
        env = env_of(render_job(cfg, "ingest", layer, run_id="r", parallelism=1))
        assert env["PCG_N_PROCESSES"] == str(expected), layer


def test_stage_override_of_processes_and_burst(tmp_path):
    stage_job = {"meshing": {"processes_per_vcpu": 3, "burst": False}}
    cfg = make_config(tmp_path, {"job": {"workloads": stage_job}}, {"mesh_config": {}})
    ingest = render_job(cfg, "ingest", 3, run_id="r", parallelism=1)
    meshing = render_job(cfg, "meshing", 3, run_id="r", parallelism=1)
    assert env_of(ingest)["PCG_N_PROCESSES"] == "1" and env_of(meshing)["PCG_N_PROCESSES"] == "1"
    assert "limits" not in pod_spec(ingest)["containers"][0]["resources"]
    resources = pod_spec(meshing)["containers"][0]["resources"]
    assert resources["limits"] == resources["requests"]  # job.burst: false


def test_env_may_not_set_n_processes(tmp_path):
    cfg = make_config(tmp_path, {"env": {"PCG_N_PROCESSES": "4"}})
    with pytest.raises(ManifestError, match=r"env\.PCG_N_PROCESSES: .*job\.processes_per_vcpu"):
        render_job(cfg, "ingest", 2, run_id="r", parallelism=1)


@pytest.mark.parametrize("layer", [2, 3, 4, 5])
def test_lock_expiry_grows_per_layer(tmp_path, layer):
    cfg = make_config(tmp_path, {"job": {"lock_expiry_s": 100, "lock_expiry_factor": 1.5}})
    env = env_of(render_job(cfg, "ingest", layer, run_id="r", parallelism=1))
    assert int(env["PCG_LOCK_EXPIRY_S"]) == math.ceil(100 * 1.5 ** (layer - 2))


@pytest.mark.parametrize(
    "name", ["PCG_LAYER", "PCG_GRID_SHAPE", "PCG_WORKLOAD", "PCG_GRAPH_ID", "PCG_BATCH_SIZE"]
)
def test_env_may_not_shadow_controller_names(tmp_path, name):
    cfg = make_config(tmp_path, {"env": {name: "x"}})
    with pytest.raises(ManifestError, match=f"env.{name}"):
        render_job(cfg, "ingest", 2, run_id="r", parallelism=1)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BIGTABLE_PROJECT", "x"),
        ("BIGTABLE_INSTANCE", "x"),
        ("PCG_DATASET", "x"),
        ("PCG_LOCK_EXPIRY_SCALE", "0.25"),  # a number: the scale is checked
    ],
)
def test_env_replaces_the_keys_the_predecessor_let_operators_set(tmp_path, name, value):
    cfg = make_config(tmp_path, {"env": {name: value}})
    manifest = render_job(cfg, "ingest", 3, run_id="r", parallelism=1)
    names = [e["name"] for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert names.count(name) == 1 and env_of(manifest)[name] == value


@pytest.mark.parametrize(
    ("graph", "stage", "layer"),
    [
        ("toy", "ingest", 2),
        (LONG_GRAPH, "migrate_cleanup", 12),
        ("g" * 63, "meshing", 255),
        ("a-", "l2cache", 2),
        ("x_y_", "migrate", 3),
    ],
)
def test_job_name(graph, stage, layer):
    name = job_name(graph, stage, layer, "run-1")
    assert DNS_LABEL.match(name) and len(name) <= MAX_JOB_NAME <= 63
    assert name.startswith("pcg-") and f"-{stage.replace('_', '-')}-l{layer}-" in name
    assert name == job_name(graph, stage, layer, "run-1")  # deterministic
    assert name != job_name(graph, stage, layer, "run-2")
    assert name.endswith(hashlib.sha256(b"run-1").hexdigest()[:6])


def test_a_stage_without_workload_or_command_is_refused(tmp_path):
    cfg = make_config(tmp_path)
    bare = cfg.model_copy(update={"workloads": {}})
    with pytest.raises(
        ManifestError, match=r"workloads\.ingest: .*neither a workload nor a command"
    ):
        render_job(bare, "ingest", 2, run_id="r", parallelism=1)


def test_job_name_example():
    assert job_name("my_graph", "ingest", 3, "r").startswith("pcg-my-graph-ingest-l3-")


@pytest.mark.parametrize(
    ("text", "same"),
    [
        ("run-1", True),
        ("a" * 63, True),
        ("2025-01-01T00:00:00Z", False),
        ("x" * 80, False),
        ("-", False),
    ],
)
def test_label_value(text, same):
    value = label_value(text)
    assert LABEL_VALUE.match(value) and len(value) <= 63
    assert (value == text) is same


def test_long_run_id_keeps_the_full_id_in_an_annotation(tmp_path):
    run_id = "2025-01-01T00:00:00.000000+00:00/" + "z" * 60
    m = render_job(make_config(tmp_path), "ingest", 2, run_id=run_id, parallelism=1)
    kubernetes_validate.validate(m, K8S_VERSION, strict=True)
    assert m["metadata"]["annotations"]["cave-pipeline/run-id"] == run_id
    assert env_of(m)["PCG_RUN_ID"] == run_id


def test_high_completions_caps(tmp_path):
    # 500x400x1 chunks at batch 1: 200000 indexes, above Kubernetes' 100000 soft limit.
    cfg = make_config(
        tmp_path,
        {"job": {"batch_size": 1, "max_failed_tasks": 50000}},
        {"data_source": {"size": [500, 400, 1]}, "graph_config": {"CHUNK_SIZE": [1, 1, 1]}},
    )
    m = render_job(cfg, "ingest", 2, run_id="r", parallelism=50000)
    assert m["spec"]["completions"] == 200000
    assert m["spec"]["parallelism"] == 10000 and m["spec"]["maxFailedIndexes"] == 10000


def test_too_many_batches_for_hostnames(tmp_path):
    # 2.5M indexes: "<56-char name>-2499999" would be a 64-char pod hostname.
    cfg = make_config(
        tmp_path,
        {"graph_id": LONG_GRAPH, "job": {"batch_size": 1}},
        {"data_source": {"size": [2500, 1000, 1]}, "graph_config": {"CHUNK_SIZE": [1, 1, 1]}},
    )
    with pytest.raises(ManifestError, match="job.batch_size"):
        render_job(cfg, "ingest", 2, run_id="r", parallelism=1)


def test_overrides_and_ceilings(tmp_path):
    resources = {"memory": {"base": 32, "factor": 2}, "overrides": {5: {"cpu": 20, "memory": 100}}}
    cfg = make_config(tmp_path, {"job": {"resources": resources}})
    reqs = {
        layer: requests_of(render_job(cfg, "ingest", layer, run_id="r", parallelism=1))
        for layer in (2, 3, 5)
    }
    assert reqs[2] == {"cpu": "5000m", "memory": "32768Mi"}  # CPU raised for 1:6.5
    assert reqs[3] == {"cpu": "10000m", "memory": "65536Mi"}
    assert reqs[5] == {"cpu": "20000m", "memory": "102400Mi"}  # the override wins
    with pytest.raises(ManifestError, match=r"job\.compute_class.*job\.resources\.overrides"):
        render_job(cfg, "ingest", 4, run_id="r", parallelism=1)  # 128 GiB > 110
    with pytest.raises(ManifestError, match="layer 4"):
        validate_config_renders(cfg)
    bigger = make_config(tmp_path, {"job": {"compute_class": "Balanced", "resources": resources}})
    validate_config_renders(bigger)  # Balanced allows 128 GiB


def test_stage_override_named_in_resource_errors(tmp_path):
    cfg = make_config(
        tmp_path, {"job": {"workloads": {"meshing": {"resources": {"cpu": {"base": 40}}}}}}
    )
    with pytest.raises(ManifestError, match=r"job\.workloads\.meshing"):
        render_job(cfg, "meshing", 2, run_id="r", parallelism=1)
    render_job(cfg, "ingest", 2, run_id="r", parallelism=1)  # other stages unaffected


def test_typo_in_images_is_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match=r"images\.mehsing"):
        make_config(tmp_path, {"images": {"mehsing": IMAGE}})


@pytest.mark.parametrize(
    ("pipeline", "dataset", "stage", "layer", "parallelism", "match"),
    [
        ({"images": {"meshing": ""}}, {}, "meshing", 2, 1, r"images\.meshing"),
        ({}, {}, "migrate", 2, 1, r"images\.migrate"),
        ({}, {}, "ingest", 6, 1, r"2\.\.5"),
        ({}, {}, "ingest", 1, 1, r"2\.\.5"),
        ({}, {}, "ingest", 2, 0, "parallelism"),
        ({}, {}, "bogus", 2, 1, "unknown"),
        ({"namespace": "Bad_NS"}, {}, "ingest", 2, 1, "namespace"),
        ({"workload_identity": {"ksa": "Bad KSA"}}, {}, "ingest", 2, 1, "workload_identity.ksa"),
        ({"commands": {"ingest": []}}, {}, "ingest", 2, 1, r"commands\.ingest"),
        ({"env": {"A=B": "x"}}, {}, "ingest", 2, 1, r"env\.A=B"),
        ({"zone": "us east"}, {}, "ingest", 2, 1, "zone"),
    ],
)
def test_refusals_name_the_field(tmp_path, pipeline, dataset, stage, layer, parallelism, match):
    cfg = make_config(tmp_path, pipeline, dataset)
    with pytest.raises(ManifestError, match=match):
        render_job(cfg, stage, layer, run_id="r", parallelism=parallelism)


def test_empty_run_id_refused(tmp_path):
    with pytest.raises(ManifestError, match="run id"):
        render_job(make_config(tmp_path), "ingest", 2, run_id="", parallelism=1)


@pytest.mark.parametrize(
    ("dataset", "expected"),
    [
        ({}, [("ingest", n) for n in range(2, 6)]),
        ({"l2cache_config": {}}, [("ingest", n) for n in range(2, 6)] + [("l2cache", 2)]),
        (
            {"mesh_config": {}},
            [("ingest", n) for n in range(2, 6)] + [("meshing", n) for n in range(2, 6)],
        ),
        (
            {"mesh_config": {"max_layer": 3}},
            [("ingest", n) for n in range(2, 6)] + [("meshing", 2), ("meshing", 3)],
        ),
        (  # past the root (5): meshing stops at the root, as the predecessor clamped it
            {"mesh_config": {"max_layer": 6}},
            [("ingest", n) for n in range(2, 6)] + [("meshing", n) for n in range(2, 6)],
        ),
    ],
)
def test_implied_renders(tmp_path, dataset, expected):
    assert implied_renders(make_config(tmp_path, {}, dataset)) == expected


@pytest.mark.parametrize(
    ("pipeline", "dataset", "match"),
    [
        ({"images": {"ingest": ""}}, {}, r"images\.ingest"),
        ({"images": {"l2cache": ""}}, {"l2cache_config": {}}, r"images\.l2cache"),
        ({"images": {"meshing": ""}}, {"mesh_config": {}}, r"images\.meshing"),
    ],
)
def test_validate_config_renders_refuses(tmp_path, pipeline, dataset, match):
    cfg: PipelineConfig = make_config(tmp_path, pipeline, dataset)
    with pytest.raises(ManifestError, match=match):
        validate_config_renders(cfg)


def test_validate_config_renders_accepts_a_good_config(tmp_path):
    validate_config_renders(make_config(tmp_path, *CONFIGS["everything"]))


# --- mounts that suit the image (docs/deploying.md, finding 8) ---------------------


def _mounts(manifest: dict) -> tuple[dict[str, dict], dict[str, dict]]:
    pod = manifest["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    return volumes, mounts


@pytest.mark.parametrize(
    "commands,secrets",
    [
        ({}, "/home/worker/.cloudvolume/secrets"),  # our worker image: uid 10001
        (
            {"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]},
            "/root/.cloudvolume/secrets",
        ),
    ],
    ids=["worker-image", "pychunkedgraph-image"],
)
def test_the_secret_is_mounted_where_the_images_user_reads_it(tmp_path, commands, secrets):
    cfg = make_config(
        tmp_path, {"commands": commands, "secret_files": {"google-secret.json": "key.json"}}
    )
    from shared.jobs.setup_job import render_setup_job

    for m in (
        render_job(cfg, "ingest", 2, run_id="r1", parallelism=1),
        render_setup_job(cfg, "ingest", run_id="r1"),
    ):
        kubernetes_validate.validate(m, K8S_VERSION, strict=True)
        volumes, mounts = _mounts(m)
        assert mounts["secrets"]["mountPath"] == secrets
        assert env_of(m)["GOOGLE_APPLICATION_CREDENTIALS"] == f"{secrets}/google-secret.json"
        # readable by whichever user the image runs as
        assert volumes["secrets"]["secret"]["defaultMode"] & 0o004


def test_the_worker_images_user_and_home_are_the_ones_the_mounts_assume():
    from shared.model.worker_contract import WORKER_HOME, WORKER_SECRETS_DIR, WORKER_UID

    dockerfile = (Path(__file__).resolve().parents[3] / "worker.Dockerfile").read_text()
    assert re.search(rf"^USER {WORKER_UID}$", dockerfile, re.M)
    assert re.search(rf"^ENV HOME={re.escape(WORKER_HOME)}$", dockerfile, re.M)
    assert re.search(rf"useradd --create-home --uid {WORKER_UID} .*worker$", dockerfile, re.M)
    assert WORKER_SECRETS_DIR == f"{WORKER_HOME}/.cloudvolume/secrets"


def test_the_dataset_is_mounted_as_one_file_so_the_images_folder_stays(tmp_path):
    m = render_job(make_config(tmp_path), "ingest", 2, run_id="r1", parallelism=1)
    volumes, mounts = _mounts(m)
    assert mounts["dataset"] == {
        "name": "dataset",
        "mountPath": "/app/datasets/dataset.yml",
        "subPath": "dataset.yml",  # the ConfigMap's key; /app/datasets keeps the image's files
        "readOnly": True,
    }
    assert env_of(m)["PCG_DATASET"] == "/app/datasets/dataset.yml"
    from shared.jobs.setup_job import dataset_config_map_manifest

    assert "dataset.yml" in dataset_config_map_manifest(make_config(tmp_path), "r1")["data"]


def test_setup_pods_run_as_the_setup_account_and_layer_pods_as_the_workers(tmp_path):
    from shared.jobs.setup_job import render_setup_job

    cfg = make_config(tmp_path, {"workload_identity": {"ksa": "w", "setup_ksa": "s"}})
    layer = render_job(cfg, "ingest", 2, run_id="r1", parallelism=1)
    setup = render_setup_job(cfg, "ingest", run_id="r1")
    assert layer["spec"]["template"]["spec"]["serviceAccountName"] == "w"
    assert setup["spec"]["template"]["spec"]["serviceAccountName"] == "s"
    with pytest.raises(ManifestError, match="workload_identity.setup_ksa"):
        validate_config_renders(
            make_config(tmp_path, {"workload_identity": {"setup_ksa": "Not_Valid"}})
        )
