"""Operating a build through the real event path on the local stack: a fatal chunk is
alerted with its coordinates and traceback and blocks the run until the operator fixes the
input and re-submits; pause suspends the Jobs and keeps finished work; Spot preemptions during
the demo ingest leave a graph the oracle accepts."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters import wiring
from adapters.bigtable.chunk_ledger import (
    close_bigtable_client,
    ensure_table,
    open_bigtable_client,
)
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import PubSubBus
from adapters.local.stack import LocalStack
from demo.graph_table import read_all_nodes
from demo.oracle import compare, expected_stats, observed_stats
from demo.volume import generate_volume, save_volume
from shared.config.config import PipelineConfig
from shared.config.config_files import config_from_dict, load_config
from shared.model import intervals
from shared.model.layers import layer_count
from shared.model.state import RunState
from shared.operate import config_versions as versions
from shared.operate import operator_actions as ops
from shared.reconcile.build_plan import new_run

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(need_emulators, tmp_path_factory) -> Iterator[LocalStack]:
    with wiring.local_stack("ops-test", tmp_path_factory.mktemp("stack"), tick_period_s=2.0) as s:
        yield s


def config(tmp: Path, **job: object) -> PipelineConfig:
    """The demo config on a 32^3 volume (4x4x4 chunks), with `job` overrides."""
    cfg = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
    volume = tmp / "volume.npy"
    save_volume(volume, generate_volume((32, 32, 32), 7))
    source = cfg.ds.data_source.model_copy(update={"size": (32, 32, 32), "watershed": str(volume)})
    graph = cfg.ds.graph_config.model_copy(update={"CHUNK_SIZE": (8, 8, 8)})
    ds = cfg.ds.model_copy(update={"data_source": source, "graph_config": graph})
    return cfg.model_copy(
        update={"dataset_config": ds, "job": cfg.job.model_copy(update=job), "project": "ops-test"}
    )


def napping(tmp: Path, graph_id: str, chunk_s: float) -> PipelineConfig:
    """The demo config (batches of 8) whose chunks only sleep `chunk_s`: a layer that runs
    long enough to be acted on while it runs."""
    cfg = config(tmp, batch_size=8)
    return cfg.model_copy(
        update={
            "graph_id": graph_id,
            "env": {"TEST_PLUGIN_SLEEP_S": str(chunk_s)},
            "workloads": {"ingest": "tests.builders.plugins:nap"},
        }
    )


def start(
    stack: LocalStack, cfg: PipelineConfig, run_id: str, budget_usd: float | None = None
) -> FirestoreRunStore:
    ensure_table(cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance)
    store = FirestoreRunStore(stack.project)
    run = new_run(cfg, run_id, ["ingest"], "auto", datetime.now(UTC), budget_usd=budget_usd)
    store.create_run(run)
    kick(stack, run_id)
    return store


def published(bus: PubSubBus, subscription: str, kind: str, timeout: float = 60) -> dict:
    """The body of the first `kind` alert published on the subscription (log tails are
    added when an alert is published, so the outbox copy has none)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = bus.subscriber.pull(subscription=subscription, max_messages=20, timeout=10)
        for m in response.received_messages:
            if m.message.attributes.get("kind") == kind:
                return json.loads(m.message.data)
    pytest.fail(f"no {kind} alert published within {timeout:.0f} s")


def kick(stack: LocalStack, run_id: str) -> None:
    bus = PubSubBus(stack.project)
    bus.publish_json("kick", {"run_id": run_id, "action": "test"})
    bus.close()


def wait_for(
    store: FirestoreRunStore,
    run_id: str,
    what: str,
    predicate: Callable[[RunState], bool],
    timeout: float = 120,
) -> RunState:
    deadline = time.monotonic() + timeout
    while True:
        run = store.load_run(run_id)
        if predicate(run):
            return run
        if time.monotonic() > deadline:
            phases = {k: (ls.phase, ls.progress.completed_indexes) for k, ls in run.layers.items()}
            raise AssertionError(f"{run_id}: not {what} after {timeout}s: {run.status} {phases}")
        time.sleep(0.3)


def test_fatal_chunk_alerts_blocks_and_resumes_after_resubmit(stack, tmp_path):
    marker = tmp_path / "corrupt"
    marker.write_text("x")
    cfg = config(tmp_path, task_retries=0, batch_size=32)
    cfg = cfg.model_copy(
        update={
            "graph_id": "ops-fatal",
            "env": {"TEST_FAIL_MARKER": str(marker)},
            "workloads": {"ingest": "tests.builders.plugins:fatal_at_origin"},
        }
    )
    bus = PubSubBus(stack.project)
    subscription = bus.ensure_subscription("alerts", "test-fatal-alerts")
    store = start(stack, cfg, "r-fatal")
    run = wait_for(
        store, "r-fatal", "failed at L2", lambda r: r.layers["ingest-L2"].phase == "failed"
    )
    assert run.layers["ingest-L3"].phase == "waiting"  # the run stops advancing
    alerts = {a.kind: a.body for a in store.all_alerts("r-fatal")}
    assert {"failed_indexes", "layer_failed"} <= set(alerts)
    batch = published(bus, subscription, "failed_indexes")["batches"][0]
    bus.close()
    assert [0, 0, 0] in batch["chunks"]
    assert "FatalChunkError" in batch["log_tail"] and "corrupt watershed" in batch["log_tail"]

    marker.unlink()  # the operator fixes the input, then re-submits the layer
    store.update_run("r-fatal", lambda r: ops.resubmit(r, "ingest", 2, "ana", datetime.now(UTC)))
    kick(stack, "r-fatal")
    run = wait_for(store, "r-fatal", "succeeded", lambda r: r.status == "succeeded")
    assert run.layers["ingest-L2"].job.attempt == 1
    assert "run_finished" in {a.kind for a in store.all_alerts("r-fatal")}
    # The re-submitted Job skipped the chunks the first one had finished.
    logs = "".join(
        stack.cluster.pod_log(p.name, 5)
        for p in stack.cluster.list_pods(run.layers["ingest-L2"].job.name)
    )
    assert '"skipped": 32' in logs


def test_pause_suspends_jobs_keeps_work_and_resume_finishes(stack, tmp_path):
    cfg = napping(tmp_path, "ops-pause", 0.2)
    store = start(stack, cfg, "r-pause")
    run = wait_for(
        store,
        "r-pause",
        "making progress",
        lambda r: intervals.count(r.layers["ingest-L2"].progress.completed_indexes) >= 1,
    )
    store.update_run("r-pause", ops.pause)
    kick(stack, "r-pause")
    name = run.layers["ingest-L2"].job.name
    deadline = time.monotonic() + 60
    while not ((job := stack.cluster.get_job(name)).suspended and job.active == 0):
        assert time.monotonic() < deadline, f"job not suspended: {job}"
        time.sleep(0.2)
    kept = intervals.count(job.completed_indexes)
    assert kept >= 1
    time.sleep(3)  # a tick passes: a paused run starts nothing
    assert stack.cluster.get_job(name).active == 0
    assert store.load_run("r-pause").layers["ingest-L3"].phase == "waiting"
    store.update_run("r-pause", ops.resume)
    kick(stack, "r-pause")
    wait_for(store, "r-pause", "succeeded", lambda r: r.status == "succeeded")
    assert intervals.count(stack.cluster.get_job(name).completed_indexes) == job.completions


def test_spot_preemptions_during_the_demo_ingest_leave_a_correct_graph(stack, tmp_path):
    cfg = config(tmp_path, batch_size=8, task_retries=1)
    cfg = cfg.model_copy(update={"graph_id": "ops-chaos"})
    store = start(stack, cfg, "r-chaos")
    rng = random.Random(3)
    preempted: list[str] = []
    done = threading.Event()

    def chaos() -> None:
        # A handful of preemptions spread over the run (Spot reclaims some nodes, not all).
        while len(preempted) < 4 and not done.wait(1.5):
            name = stack.kube.preempt_random_pod(rng)
            if name:
                preempted.append(name)

    thread = threading.Thread(target=chaos, daemon=True)
    thread.start()
    try:
        run = wait_for(store, "r-chaos", "succeeded", lambda r: r.status == "succeeded", 240)
    finally:
        done.set()
        thread.join()
    assert preempted, "the chaos thread never found a running pod to preempt"
    # Preemptions of layer pods are recorded as such and spend no retry budget (a preempted
    # setup pod is replaced too, and the run succeeding shows it; it is no layer's pod).
    # The eviction reaches the kubelet by a watch: a pod evicted twice inside that window is
    # one preemption of one pod. A pod evicted on its last chunk may finish it in its grace
    # period and succeed: no preemption then (it failed nothing), so the evicted pods are
    # counted by how they ended. An evicted pod is deleted once the Job controller has
    # counted it: one that went between two reconciles was never seen finished and has no
    # record (closed at its last sighting, shared.reconcile.pod_accounting), so the records
    # name how the evicted pods the controller saw ended, not all of them.
    of_layers = {name for name in preempted if "-setup-" not in name}
    ended = {
        r["name"]: r["phase"]
        for ls in run.layers.values()
        if ls.job.name
        for r in store.pod_records(run.run_id, ls.key)
    }
    failed_by_eviction = {name for name in of_layers if ended.get(name) == "Failed"}
    assert sum(ls.pods.preempted for ls in run.layers.values()) == len(failed_by_eviction)
    assert sum(ls.pods.failed for ls in run.layers.values()) == 0
    # The Job controller's own count: the DisruptionTarget rule ignored every eviction, so no
    # index spent a retry, whether or not the controller saw the pod.
    jobs = [stack.cluster.get_job(ls.job.name) for ls in run.layers.values() if ls.job.name]
    assert all(j is not None and j.failed == 0 for j in jobs), jobs
    client = open_bigtable_client(
        cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance, timedelta(seconds=30)
    )
    try:
        nodes = read_all_nodes(client)
    finally:
        close_bigtable_client(client)
    n_layers = layer_count(cfg.layer2_shape())
    volume = generate_volume((32, 32, 32), 7)
    result = compare(expected_stats(volume, (8, 8, 8), n_layers), observed_stats(nodes, n_layers))
    assert result.ok, result.mismatches


def test_budget_guard_pauses_the_run_and_alerts(stack, tmp_path):
    """A run whose estimated spend reaches its budget is paused (Jobs suspended, finished
    work kept) and alerts once; the operator resumes it."""
    cfg = config(tmp_path, batch_size=8)
    cfg = cfg.model_copy(
        update={
            "graph_id": "ops-budget",
            "env": {"TEST_PLUGIN_SLEEP_S": "0.3"},
            "workloads": {"ingest": "tests.builders.plugins:nap"},
        }
    )
    store = start(stack, cfg, "r-budget", budget_usd=0.0001)
    run = wait_for(store, "r-budget", "paused by the budget", lambda r: r.status == "paused")
    alerts = [a for a in store.all_alerts("r-budget") if a.kind == "budget_reached"]
    assert len(alerts) == 1 and alerts[0].body["spend_usd"] >= 0.0001
    # The guard priced the pods' recorded usage, not only the cluster fee (which alone
    # reaches so small a budget within seconds).
    assert alerts[0].body["pods_usd"] > 0
    usage = run.layers["ingest-L2"]
    assert usage.pods.cpu_seconds + usage.pods.running_cpu_seconds > 0
    name = run.layers["ingest-L2"].job.name
    deadline = time.monotonic() + 60
    while not stack.cluster.get_job(name).suspended:
        assert time.monotonic() < deadline, "the budget guard did not suspend the Job"
        time.sleep(0.2)
    store.update_run("r-budget", ops.resume)  # the operator raises the limit by resuming
    kick(stack, "r-budget")
    wait_for(store, "r-budget", "succeeded", lambda r: r.status == "succeeded")
    assert len([a for a in store.all_alerts("r-budget") if a.kind == "budget_reached"]) == 1


def test_a_delete_then_submit_never_overlaps_the_old_pods(stack, tmp_path):
    """`pipeline delete` and `pipeline submit` of a running layer with no reconcile between:
    the old Job is still deleted, its pods finish their chunk in their grace period, and the
    new attempt's Job is created only once none of them still runs (watched from the cluster
    throughout); then the run completes."""
    cfg = napping(tmp_path, "ops-resubmit", 0.4)
    store = start(stack, cfg, "r-resubmit")
    run = wait_for(
        store, "r-resubmit", "running L2 pods", lambda r: r.layers["ingest-L2"].progress.active >= 1
    )
    old = run.layers["ingest-L2"].job.name

    seen: dict[str, list] = {"overlaps": [], "old_pods": [], "new_created": []}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            olds = stack.cluster.list_pods(old)
            live_old = [p.name for p in olds if p.phase in ("Pending", "Running")]
            seen["old_pods"] += [p.name for p in olds]
            new = store.load_run("r-resubmit").layers["ingest-L2"].job.name
            news = stack.cluster.list_pods(new) if new and new != old else []
            seen["new_created"] += [p.created for p in news if p.created]
            if live_old and news:
                seen["overlaps"].append((live_old, [p.name for p in news]))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    def delete_and_submit(r: RunState) -> None:
        now = datetime.now(UTC)
        ops.cancel(r, "ingest", 2, "ana", now)
        ops.resubmit(r, "ingest", 2, "ana", now)

    store.update_run("r-resubmit", delete_and_submit)
    kick(stack, "r-resubmit")
    try:
        run = wait_for(store, "r-resubmit", "succeeded", lambda r: r.status == "succeeded")
    finally:
        stop.set()
        watcher.join(5)
    assert run.layers["ingest-L2"].job.attempt == 1
    assert stack.cluster.get_job(old) is None  # the pending delete was carried out
    assert seen["old_pods"] and seen["new_created"]
    assert seen["overlaps"] == []


def test_an_env_fix_applied_mid_layer_replaces_its_job_and_the_new_one_skips_done_chunks(
    stack, tmp_path
):
    """A lab fixes a running layer's `env:` mid-run (`pipeline apply`'s mutation, as the CLI
    commits it): the running Job is deleted at once and a new attempt created by the
    controller, whose workers skip the chunks the first one finished; the run completes."""
    cfg = napping(tmp_path, "ops-drift", 0.4)
    store = start(stack, cfg, "r-drift")
    run = wait_for(
        store,
        "r-drift",
        "making progress",
        lambda r: intervals.count(r.layers["ingest-L2"].progress.completed_indexes) >= 1,
    )
    kept = intervals.count(run.layers["ingest-L2"].progress.completed_indexes)
    old = run.layers["ingest-L2"].job.name
    fixed = cfg.model_copy(update={"env": {"TEST_PLUGIN_SLEEP_S": "0.05"}})
    entry: dict = {}

    def apply(r: RunState) -> None:
        changes = versions.diff(config_from_dict(r.config, r.dataset), fixed)
        entry.update(versions.apply_config(r, fixed, changes, False, "ana", datetime.now(UTC)))

    store.update_run("r-drift", apply)
    kick(stack, "r-drift")
    running = {x["layer"]: x["action"] for x in entry["running_layers"]}
    assert running["ingest-L2"] == "replace"
    run = wait_for(store, "r-drift", "succeeded", lambda r: r.status == "succeeded", 240)
    ls = run.layers["ingest-L2"]
    assert ls.job.attempt == 1 and ls.job.name != old
    assert stack.cluster.get_job(old) is None
    logs = [stack.cluster.pod_log(p.name, 5) for p in stack.cluster.list_pods(ls.job.name)]
    skipped = sum(int(n) for text in logs for n in re.findall(r'"skipped": (\d+)', text))
    assert skipped >= 8 * kept  # batches of 8 chunks: each index done before is skipped


def test_the_trigger_subscriptions_back_off_as_terraform_deploys_them(stack):
    """A function answering 5xx gets its message back after 10 s (doubling), not at once: an
    API outage does not become a tight loop of redeliveries (terraform/functions.tf)."""
    from adapters.local.stack import ROUTES, TRIGGER_RETRY_BACKOFF_S

    for sub in ROUTES:
        path = stack.bus.subscription_path(sub)
        policy = stack.bus.subscriber.get_subscription(subscription=path).retry_policy
        got = (policy.minimum_backoff.total_seconds(), policy.maximum_backoff.total_seconds())
        assert got == TRIGGER_RETRY_BACKOFF_S, sub
