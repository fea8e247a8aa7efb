"""The operator's debugging and housekeeping commands (scripts/commands/inspect.py, pods.py,
costs.py, admin.py) end to end: runs in the Firestore emulator, Jobs in a real local
cluster read through its state directory.

The local cluster runs three Jobs: the run's ingest L2 Job (8 indexes; 3, 5 and 6 print a
worker's JSON failure line with a traceback and exit 42), a one-pod Job held running for
`top`, and a Job that cannot be scheduled (its pod stays Pending) for `pods`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner, Result

from adapters.gke.cluster import GkeCluster
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import PubSubBus
from scripts import cluster_access
from scripts.cli import main
from shared.config.config_files import load_config
from shared.jobs.layer_spec import layer_spec
from shared.jobs.manifest import render_job
from shared.model import grid
from shared.model.layers import layer_count, layer_shape
from shared.model.state import RunState
from shared.ports.run_store import RunNotFoundError
from shared.reconcile.build_plan import new_run
from tests.builders.demo_configs import with_batch

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"
CFG = with_batch(load_config(DEMO))
SHAPE = layer_shape(CFG.layer2_shape(), 2)  # the demo's layer 2 geometry
SEED, BATCH = CFG.job.perm_seed, grid.layer_batch_size(CFG.job.batch_size, 2)
N_BATCHES = grid.num_batches(SHAPE, BATCH)
NOW = datetime.now(UTC)
TIMEOUT = 120.0
FAILED = (3, 5, 6)

FAKE_WORKER = r"""
import json, os, sys, time
i = int(os.environ["JOB_COMPLETION_INDEX"])
hold = os.environ.get("HOLD")
if hold:
    while not os.path.exists(hold):
        time.sleep(0.05)
print(json.dumps({"severity": "INFO", "message": f"layer 2 batch {i}: 32 chunks", "index": i}))
if i in (3, 5, 6):
    # 6: as PyChunkedGraph's meshing does, every exception is transient (exit 1), retried
    code = 1 if i == 6 else 42
    tb = ('Traceback (most recent call last):\n  File "demo_ingest.py", line 9, in '
          'process_chunk\n    raise ValueError("bad supervoxel 7")\nValueError: bad supervoxel 7\n')
    print(json.dumps({"severity": "ERROR", "message": "fatal chunk 2_(1, 2, 3): bad supervoxel 7",
                      "index": i, "chunk": "2_(1, 2, 3)", "coord": [1, 2, 3],
                      "traceback": tb, "exit_code": code}), flush=True)
    sys.exit(code)
print("plain text line", flush=True)
"""


def _job(
    cfg: Any,
    layer: int,
    run_id: str,
    completions: int,
    env: dict[str, str] | None = None,
    cpu: str | None = None,
) -> dict[str, Any]:
    """The layer's real manifest, with the fake worker as its command."""
    m = render_job(cfg, "ingest", layer, run_id=run_id, parallelism=completions)
    spec = m["spec"]
    spec["completions"], spec["maxFailedIndexes"] = completions, completions
    container = spec["template"]["spec"]["containers"][0]
    container["command"] = ["python", "-c", FAKE_WORKER]
    container["env"] += [{"name": k, "value": v} for k, v in (env or {}).items()]
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return m


def _wait(predicate: Any, what: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while not (value := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, local_kubernetes: Any
) -> Iterator[dict[str, Any]]:
    """Three Jobs on local Kubernetes, created as the controller: L2 (8 indexes, 3 failed: 3
    and 5 exit 42, 6 exits 1 on every attempt), L3
    (one pod held running) and one whose pod no node fits."""
    cfg = with_batch(load_config(DEMO))
    state_dir = tmp_path_factory.mktemp("cluster")
    hold = state_dir / "release"
    names = {
        "l2": layer_spec(cfg, "ingest", 2).job_name("r1"),
        "l3": layer_spec(cfg, "ingest", 3).job_name("r1"),
    }
    kube = local_kubernetes
    lc = GkeCluster.from_kubeconfig(
        namespace=kube.namespace, config_file=str(kube.controller_kubeconfig)
    )
    m2 = _job(cfg, 2, "r1", 8)
    m2["metadata"]["name"] = names["l2"]
    lc.create_job(m2)
    m3 = _job(cfg, 3, "r1", 1, {"HOLD": str(hold)})
    m3["metadata"]["name"] = names["l3"]
    lc.create_job(m3)
    big = _job(cfg, 4, "r1", 1, cpu="64")
    big["metadata"]["name"] = names["big"] = "too-big"
    lc.create_job(big)
    try:
        _wait(lambda: (j := lc.get_job(names["l2"])) is not None and j.finished, "the L2 job")
        _wait(lambda: [p for p in lc.list_pods(names["l3"]) if p.phase == "Running"], "L3 pod")
        _wait(
            lambda: any(p.reason == "FailedScheduling" for p in lc.list_pods("too-big")),
            "an unschedulable pod",
        )
        yield {"names": names, "cluster": lc, "kube": kube}
    finally:
        hold.touch()
        for name in names.values():
            lc.delete_job(name)


@pytest.fixture
def store(firestore_project: str) -> FirestoreRunStore:
    return FirestoreRunStore(firestore_project)


@pytest.fixture
def run(store: FirestoreRunStore, cluster: dict[str, Any]) -> RunState:
    """Run r1: ingest L2 failed with indexes 3,5-6 (and an alert, pod records), L3 running."""
    cfg = with_batch(load_config(DEMO))
    store.create_run(new_run(cfg, "r1", ["ingest"], "auto", NOW - timedelta(hours=2)))
    before = store.load_run("r1")
    after = store.load_run("r1")
    l2, l3 = after.layers["ingest-L2"], after.layers["ingest-L3"]
    l2.phase, l2.job.name, l2.job.completions = "failed", cluster["names"]["l2"], N_BATCHES
    l2.progress.failed_indexes, l2.progress.completed_indexes = "3,5-6", "0-2,4,7"
    l2.failure_reason = "FailedIndexes"
    l2.timing.submitted_at, l2.timing.finished_at = (
        NOW - timedelta(hours=2),
        NOW - timedelta(hours=1),
    )
    l2.pods.cpu_request, l2.pods.memory_request_gib = 0.25, 0.5
    l2.pods.cpu_seconds, l2.pods.memory_gib_seconds = 36_000.0, 72_000.0
    l2.pods.succeeded, l2.pods.failed, l2.pods.preempted = 5, 4, 1
    l2.pods.succeeded_runtime_s = 500.0
    l3.phase, l3.job.name, l3.job.completions = "running", cluster["names"]["l3"], 1
    l3.timing.submitted_at = NOW - timedelta(minutes=30)
    alert = {
        "kind": "failed_indexes",
        "stage": "ingest",
        "layer": 2,
        "indexes": [3, 5, 6],
        "run_id": "r1",
        "batches": [],
    }
    pod = {"uid": "u-1", "name": "p-1", "index": 3, "phase": "Failed", "seconds": 3.0}
    after.config_version += 1
    version = {
        "version": after.config_version,
        "by": "rightsize",
        "at": NOW - timedelta(minutes=30),
        "forced": False,
        "changes": [{"key": "config.job.workloads.ingest.resources.overrides.3.cpu",
                     "old": 0.25, "new": 0.5, "when": "this layer's Job"}],
        "changes_omitted": 0,
    }  # fmt: skip
    store.commit(before, after, [alert], {"ingest-L2": [pod]}, [version])
    return store.load_run("r1")


@pytest.fixture
def cli(store: FirestoreRunStore, cluster: dict[str, Any]) -> Any:
    runner = CliRunner()
    # The cluster as the operators read it: their kubeconfig (terraform's operator Role).
    env = {
        "PIPELINE_PROJECT": store.db.project,
        "KUBECONFIG": str(cluster["kube"].operator_kubeconfig),
        cluster_access.NAMESPACE_ENV: cluster["kube"].namespace,
        "COLUMNS": "200",  # piped output's own width, whatever the test process inherited
    }

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(main, list(args), env=env, input=input, catch_exceptions=False)

    return invoke


def _ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def test_inspect_lists_failed_indexes_with_their_first_chunk_and_alerts(cli, run):
    out = _ok(cli("inspect", "r1", "ingest", "2"))
    assert "failed indexes: 3,5-6 (3)" in out
    assert "retries (failed pod attempts): 4" in out and "preempted: 1" in out
    for index in FAILED:
        first = tuple(int(v) for v in grid.batch_coords(index, SHAPE, SEED, BATCH)[0])
        (row,) = [ln for ln in out.splitlines() if str(first) in ln]
        assert row.split()[1] == str(index)
    assert "failed_indexes" in out and "indexes [3, 5, 6]" in out  # the alert
    assert "pipeline inspect r1 ingest 2 3" in out


def test_inspect_an_index_prints_its_pods_and_the_traceback(cli, run):
    out = _ok(cli("inspect", "r1", "ingest", "2", "3", "--chunks"))
    assert "FAILED index" in out
    assert "failing chunk: 2_(1, 2, 3) coord [1, 2, 3] exit 42" in out
    lines = out.splitlines()
    assert "    Traceback (most recent call last):" in lines
    assert "    ValueError: bad supervoxel 7" in lines
    assert any("ERROR" in ln and "[chunk 2_(1, 2, 3), exit 42]" in ln for ln in lines)
    coords = [tuple(int(v) for v in c) for c in grid.batch_coords(3, SHAPE, SEED, BATCH)]
    chunk_lines = lines[lines.index(next(ln for ln in lines if "chunks of batch 3" in ln)) + 1 :]
    assert chunk_lines == [str(c) for c in coords]
    assert "failed the same way" not in out  # one attempt: exit 42 needs no retry to tell
    # Retried on exit 1 until task_retries (2) ran out, failing identically every time.
    out = _ok(cli("inspect", "r1", "ingest", "2", "6"))
    assert "every attempt (3) failed the same way, exit 1: ValueError: bad supervoxel 7" in out
    # A succeeded index: no failing chunk, the plain line is shown as it is.
    out = _ok(cli("inspect", "r1", "ingest", "2", "0", "--tail", "5"))
    assert "failing chunk" not in out and "plain text line" in out


def test_inspect_rejects_an_index_outside_the_layer(cli, run):
    result = cli("inspect", "r1", "ingest", "2", str(N_BATCHES))
    assert result.exit_code == 2 and f"batches are 0..{N_BATCHES - 1}" in result.output


def test_pods_show_index_phase_node_reason_and_exit(cli, run, cluster):
    out = _ok(cli("pods", "r1", "ingest", "2"))
    assert "pods of job" in out
    rows = [ln for ln in out.splitlines() if cluster["names"]["l2"] + "-" in ln]
    assert len(rows) == 10  # 8 indexes; index 6 retried twice on exit 1 (task_retries 2)
    failed_rows = [r for r in rows if " 42 " in r + " "]
    assert len(failed_rows) == 2 and all("Failed" in r and "gk3-local-" in r for r in failed_rows)
    assert len([r for r in rows if "Failed" in r and " 1 " in r]) == 3
    out = _ok(cli("pods", "--job", "too-big"))
    assert "Pending" in out and "FailedScheduling: 0/3 nodes are available" in out
    assert "Insufficient cpu" in out


def test_events_contain_the_job_controllers_and_the_schedulers(cli, run):
    out = _ok(cli("events", "r1", "ingest", "2"))
    assert "SuccessfulCreate" in out and "Created pod:" in out
    assert "FailedIndexes" in out
    out = _ok(cli("events", "--job", "too-big"))
    assert "FailedScheduling" in out and "Pod/too-big-0-" in out


def test_top_reads_the_running_pods_usage_from_the_metrics_api(cli, run, cluster):
    """Local Kubernetes serves `metrics.k8s.io` through metrics-server, as GKE does
    (docs/local-cluster.md): `top` says a running pod has no sample until metrics-server's
    first scrape, then shows its usage against its request. The wait is a deadline, not a
    bound on speed: a loaded machine scrapes later."""
    deadline = time.monotonic() + 180
    while True:
        out = _ok(cli("top", "r1", "ingest", "3", "--once", "--pods"))
        assert "usage unavailable" not in out, out  # the metrics API answers
        if "no metrics sample yet" not in out:
            break
        assert time.monotonic() < deadline, f"no metrics sample after 180 s:\n{out}"
        time.sleep(2)
    [row] = [line for line in out.splitlines() if f"{cluster['names']['l3']}-0-" in line]
    assert "Running" in row and "%" in row, out  # usage as a share of the request
    assert "peak:" in out, out


def test_a_layer_without_a_job_and_an_unknown_run_exit_2(cli, run):
    result = cli("pods", "r1", "ingest", "4")
    assert result.exit_code == 2 and "it has no Job yet" in result.output
    for args in (
        ("inspect", "nope", "ingest", "2"),
        ("costs", "nope"),
        ("purge", "nope", "--yes"),
        ("pods", "nope", "ingest", "2"),
    ):
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "no run 'nope'" in result.output
    result = cli("pods", "r1", "ingest", "9")
    assert result.exit_code == 2 and "has no layer ingest L9" in result.output


def test_costs_total_is_layers_plus_fee(cli, run):
    report = json.loads(_ok(cli("costs", "r1", "--json")))
    assert report["estimate"] is True and report["region"] == CFG.region
    assert [(r["stage"], r["layer"]) for r in report["layers"]] == [("ingest", 2), ("ingest", 3)]
    l2 = report["layers"][0]
    assert l2["vcpu_hours"] == pytest.approx(10.0) and l2["gib_hours"] == pytest.approx(20.0)
    assert l2["retries"] == 4 and l2["pods"] == 10
    assert report["cluster_fee_usd"] > 0
    layers_sum = sum(r["usd"] for r in report["layers"])
    assert report["total_usd"] == pytest.approx(layers_sum + report["cluster_fee_usd"])
    assert report["stages"]["ingest"] == pytest.approx(layers_sum)
    out = _ok(cli("costs", "r1"))
    assert f"estimate, Spot, {CFG.region}" in out
    assert "subtotal" in out and "cluster fee" in out and "total" in out


def test_runs_show_a_cost_column_newest_first_and_filter_by_graph(cli, run, store):
    store.create_run(
        new_run(
            with_batch(load_config(DEMO)), "r0-older", ["ingest"], "auto", NOW - timedelta(days=3)
        )
    )
    out = _ok(cli("runs"))
    assert "cost USD" in out
    assert out.index("r1") < out.index("r0-older")
    (row,) = [ln for ln in out.splitlines() if "r0-older" in ln]
    assert "0.00" in row  # nothing submitted: nothing spent
    (row,) = [ln for ln in out.splitlines() if " r1 " in ln]
    cost = json.loads(_ok(cli("costs", "r1", "--json")))["total_usd"]
    assert "0/" in row and re.search(r" \d+\.\d\d ", row)
    assert abs(float(re.search(r" (\d+\.\d\d) ", row).group(1)) - cost) < 0.011
    assert "r1" not in _ok(cli("runs", "--graph", "another-graph"))


def test_purge_refuses_a_running_run_then_deletes_everything(cli, run, store, cluster):
    result = cli("purge", "r1", "--yes")
    assert result.exit_code == 2
    assert "pipeline pause r1" in result.output
    assert store.load_run("r1").run_id == "r1"
    result = cli("purge", "r1", "--force", input="n\n")
    assert result.exit_code == 1 and "Aborted" in result.output
    assert store.load_run("r1")
    db = store.db
    assert db.collection("jobs").document(cluster["names"]["l2"]).get().exists
    out = _ok(cli("purge", "r1", "--force", "--yes"))
    assert "job map entries" in out
    # read as on GKE (KUBECONFIG): kubectl removes the Jobs
    assert "kubectl delete job -n cave-pipeline" in out
    assert cluster["names"]["l2"] in out
    with pytest.raises(RunNotFoundError):
        store.load_run("r1")
    run_ref = db.collection("runs").document("r1")
    assert list(run_ref.collections()) == []
    assert not list(db.collection_group("pods").stream())
    assert not db.collection("jobs").document(cluster["names"]["l2"]).get().exists
    # the cluster is untouched
    assert cluster["cluster"].get_job(cluster["names"]["l2"]) is not None


def test_undeploy_asks_then_has_the_controller_delete_the_jobs(cli, run, store, cluster):
    PubSubBus(store.db.project).ensure_topic("kick")
    running = [ls.key for ls in store.load_run("r1").layers.values() if ls.phase == "running"]
    assert running
    refused = cli("undeploy", input="n\n")
    assert refused.exit_code == 1 and "delete" in refused.output
    assert store.load_run("r1").status == "running"
    out = _ok(cli("undeploy", "--yes"))
    after = store.load_run("r1")
    assert after.status == "paused" and "warning" not in out
    for key in running:  # the controller deletes these Jobs on the kick
        assert after.layers[key].job.delete_requested and after.layers[key].phase == "failed"
    assert f"({len(running)} Jobs deleted now)" in out
    assert cluster["names"]["l3"] in out and "deleting" in out  # the cluster's Jobs
    assert "`terraform destroy` removes" in out and "Firestore database" in out
    out = _ok(cli("undeploy", "--yes"))  # idempotent: nothing left to delete
    assert "(0 Jobs deleted now)" in out


def test_sample_renders_a_scattered_one_chunk_per_pod_job(cli):
    result = cli("sample", "-c", str(DEMO), "ingest", "2", "5", "--chunks")
    assert result.exit_code == 0, result.output
    manifest = yaml.safe_load(result.stdout)
    kubernetes_validate.validate(manifest, "1.33", strict=True)
    spec = manifest["spec"]
    assert spec["completions"] == 5 and spec["maxFailedIndexes"] == 5
    assert 1 <= spec["parallelism"] <= 5
    env = {e["name"]: e["value"] for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert env["PCG_BATCH_SIZE"] == "1"
    assert manifest["metadata"]["name"].endswith("-sample")
    assert manifest["metadata"]["annotations"]["cave-pipeline/batch-size"] == "1"
    # Pod i builds shuffled position i: five distinct chunks, as the worker computes them.
    chunks = [tuple(int(v) for v in grid.batch_coords(i, SHAPE, SEED, 1)[0]) for i in range(5)]
    assert len(set(chunks)) == 5
    for i, c in enumerate(chunks):
        assert f"# pod {i}: chunk {c}" in result.stderr
    root = str(layer_count(CFG.layer2_shape()))
    result = cli("sample", "-c", str(DEMO), "ingest", root, "2")
    assert result.exit_code == 2 and "has 1 chunks" in result.output


def test_read_cluster_names_what_to_set(tmp_path):
    with pytest.raises(cluster_access.ClusterAccessError, match="PIPELINE_GKE_ENDPOINT") as e:
        cluster_access.read_cluster(stack_dir=tmp_path, env={})
    assert "pipeline local up" in str(e.value)
    (tmp_path / "stack.json").write_text(json.dumps({"env": {}}))
    with pytest.raises(cluster_access.ClusterAccessError, match="older local stack"):
        cluster_access.read_cluster(stack_dir=tmp_path, env={})
    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    doc = {"env": {}, "kubeconfig": str(kubeconfig), "namespace": "cave-pipeline"}
    (tmp_path / "stack.json").write_text(json.dumps(doc))
    reader = cluster_access.read_cluster(stack_dir=tmp_path, env={})
    assert isinstance(reader, GkeCluster) and reader.namespace == "cave-pipeline"


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_gke_is_read_in_the_runs_namespace_unless_one_is_set(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    env = {"KUBECONFIG": str(kubeconfig)}
    gke = cluster_access.read_cluster("pcg", stack_dir=tmp_path, env=env)
    assert gke.namespace == "pcg"
    env[cluster_access.NAMESPACE_ENV] = "other"
    assert cluster_access.read_cluster("pcg", stack_dir=tmp_path, env=env).namespace == "other"


def test_describe_shows_the_job_its_unfinished_pods_and_warnings(cli, run, cluster):
    out = _ok(cli("describe", "r1", "ingest", "3"))
    assert f"ingest-L3 of run r1 (running) · job {cluster['names']['l3']}" in out
    assert "parallelism" in out and "unfinished pods: 1" in out and "Running" in out
    failed = _ok(cli("describe", "--job", "too-big"))
    assert "Pending" in failed and "FailedScheduling" in failed
    assert "last warning events (" in failed  # the scheduler's, about the pod


def test_describe_says_none_where_there_is_none(cli, run):
    finished = _ok(cli("describe", "r1", "ingest", "2"))
    assert "unfinished pods: none" in finished and "unfinished pods: 0" not in finished
    running = _ok(cli("describe", "r1", "ingest", "3"))
    assert "warning events: none" in running and "last warning events" not in running


def test_top_of_a_finished_job_says_how_it_ended_and_exits(cli, run, cluster, monkeypatch):
    """`top` on the failed L2 Job: one line, whatever the mode, and no refresh (a refresh
    would wait for pods that will never come)."""
    from scripts.views import terminal

    def refresh(seconds: float) -> None:
        raise AssertionError("top is still refreshing a finished Job")

    monkeypatch.setattr(terminal, "time", SimpleNamespace(sleep=refresh))
    for mode in ([], ["--pods"], ["--once"]):
        out = _ok(cli("top", "r1", "ingest", "2", *mode))
        assert out.startswith(f"ingest-L2 of run r1 finished: job {cluster['names']['l2']} Failed")
        assert "`pipeline pods r1 ingest 2`" in out and "`pipeline run r1`" in out
        assert "usage / request" not in out and "usage vs request" not in out
    out = _ok(cli("top", "--job", cluster["names"]["l2"], "--once"))
    assert out.startswith(f"job {cluster['names']['l2']} finished: Failed")
    missing = cli("top", "--job", "no-such-job")
    assert missing.exit_code == 2 and "no Job 'no-such-job' in the cluster" in missing.output


def test_run_breaks_a_run_down_by_stage_and_layer(cli, run):
    out = _ok(cli("run", "r1"))
    assert "subtotal" in out and "vCPU-h" in out and "preempt" in out
    doc = json.loads(_ok(cli("run", "r1", "--json")))
    rows = {r["layer"]: r for r in doc["layers"]}
    assert rows[2]["chunks"] == math.prod(SHAPE) and rows[2]["retries"] >= 0
    assert rows[4]["wall_s"] is None  # never submitted
    # who changed the config and when: here `job.rightsize: auto` sized L3
    assert "config v2 by rightsize at " in out
    assert "overrides.3.cpu 0.25 -> 0.5" in out.replace("\n", "")
    assert [v["by"] for v in doc["config_versions"]] == ["rightsize"]


def test_run_timeline_says_where_the_wall_time_went(cli, run):
    """`pipeline run RUN --timeline`: L3's advance is the half hour from L2's end to its Job;
    the run's wall time is the sum of its named parts and the unnamed rest."""
    doc = json.loads(_ok(cli("run", "r1", "--timeline", "--json")))
    layers = {lt["layer"]: lt for lt in doc["layers"]}
    assert layers["ingest-L3"]["advance"] == pytest.approx(1800.0, abs=1.0)
    assert sum(doc["parts_s"].values()) == pytest.approx(doc["wall_s"], abs=0.1)
    assert doc["wall_s"] >= 7200.0
    out = _ok(cli("run", "r1", "--timeline"))
    assert "where the wall time went" in out and "ingest-L3" in out and "unnamed" in out
