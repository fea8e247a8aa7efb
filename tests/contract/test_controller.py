"""The controller loop on the Firestore emulator: commit discipline under concurrency,
refused manifests, an unreachable cluster, the budget guard priced from the rate table,
and alert enrichment at publish time (best effort)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.jobs.manifest import label_value
from shared.money.pricing import RateRow
from shared.operate import operator_actions as ops
from shared.ports.cluster import (
    ClusterError,
    ClusterUnreachableError,
    ManifestRejectedError,
    PodInfo,
)
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import PodCluster, RecordingCluster
from tests.builders.stored_runs import DEMO, NOW


def _published(
    store, cluster, rates=None, now: datetime = NOW
) -> tuple[Controller, list[tuple[str, dict]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    controller = Controller(
        store, cluster, lambda k, b: out.append((k, b)), clock=lambda: now, rates=rates
    )
    return controller, out


class RacingStore(FirestoreRunStore):
    """Records the version each commit that went through was decided from, and holds every
    commit between its version read and its write until all racers got there: only the
    write's precondition can then tell them apart."""

    def __init__(self, project: str, racers: int) -> None:
        super().__init__(project)
        self.racers = racers
        self.commits: list[int] = []  # the version each successful commit was decided from
        self.arrived = threading.Barrier(racers, timeout=3)
        self._count_lock = threading.Lock()

    def _write_pod_records(self, *args: Any) -> None:
        try:
            self.arrived.wait()
        except threading.BrokenBarrierError:
            pass  # a racer lost before reaching its write: the others go on
        super()._write_pod_records(*args)

    def commit(self, before, *args: Any, **kwargs: Any) -> None:
        version = before.version
        super().commit(before, *args, **kwargs)
        with self._count_lock:
            self.commits.append(version)

    def next_round(self) -> None:
        self.commits = []
        self.arrived = threading.Barrier(self.racers, timeout=3)


def test_concurrent_reconciles_create_one_job_and_skip_no_layer(firestore_project, run):
    """Four reconciles of one run at once, all past the version check before any writes:
    exactly one decision is committed from each version (the others find the run moved on),
    one Job is created, no layer is skipped."""
    store = RacingStore(firestore_project, 4)
    cluster = RecordingCluster()
    published: list[str] = []
    controllers = [
        Controller(store, cluster, lambda kind, body: published.append(kind), clock=lambda: NOW)
        for _ in range(4)
    ]
    barrier = threading.Barrier(len(controllers))
    errors: list[BaseException] = []

    def go(c: Controller) -> None:
        barrier.wait()
        try:
            c.reconcile("r1")
        except BaseException as e:  # surfaced below
            errors.append(e)

    def reconcile_all_at_once() -> None:
        threads = [threading.Thread(target=go, args=(c,)) for c in controllers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)

    reconcile_all_at_once()
    assert not errors
    # One commit per version: a retry that saw the new Job may commit again, from version 1.
    assert store.commits[0] == 0 and len(set(store.commits)) == len(store.commits)
    state = store.load_run("r1")
    assert set(cluster.jobs) == {state.layers["ingest-L2"].job.name}
    assert state.layers["ingest-L3"].phase == "waiting"
    # Finish layer 2: concurrent reconciles start layer 3 exactly once, never layer 4.
    cluster.finish(
        state.layers["ingest-L2"].job.name,
        condition="Complete",
        completed_indexes=f"0-{state.layers['ingest-L2'].job.completions - 1}",
        completion_time=NOW,
    )
    barrier.reset()
    store.next_round()
    reconcile_all_at_once()
    assert not errors
    assert store.commits and len(set(store.commits)) == len(store.commits)
    state = store.load_run("r1")
    assert len(cluster.jobs) == 2
    assert state.layers["ingest-L3"].phase == "running"
    assert state.layers["ingest-L4"].phase == "waiting"


def test_created_job_is_the_planned_manifest_of_the_attempt(store, run):
    """The Job created carries the attempt's name in its manifest (no rename after render)
    and the ramp's parallelism."""
    cluster = RecordingCluster()
    store.update_run("r1", lambda r: setattr(r.layers["ingest-L2"].job, "attempt", 2))
    Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconcile("r1")
    ls = store.load_run("r1").layers["ingest-L2"]
    manifest = cluster.manifests[ls.job.name]
    assert manifest["metadata"]["name"] == ls.job.name
    assert manifest["spec"]["parallelism"] == ls.job.parallelism
    assert manifest["spec"]["suspend"] is False
    env = {
        e["name"]: e["value"] for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PCG_RUN_ID"] == "r1" and env["PCG_LAYER"] == "2"


def test_rejected_manifest_fails_the_layer_before_anything_runs(store, run):
    """A Job the API server would refuse is never half-started: the layer fails with the
    reason and an alert, in the same commit."""

    class Refusing(RecordingCluster):
        def validate_job(self, manifest):
            raise ManifestRejectedError("spec.template.spec.containers[0].image: Required value")

    cluster = Refusing()
    controller, published = _published(store, cluster)
    controller.reconcile("r1")
    state = store.load_run("r1")
    assert cluster.creates == []
    assert state.layers["ingest-L2"].phase == "failed"
    assert "containers[0].image" in state.layers["ingest-L2"].failure_reason
    assert [k for k, _ in published] == ["layer_failed"]
    assert "pipeline submit r1 ingest 2" in published[0][1]["fix"]


def test_config_that_renders_no_job_fails_the_layer(store, run):
    """A run whose config snapshot cannot render a layer's Job fails that layer (the same
    refusal path as the API server's), naming the config field."""
    store.update_run("r1", lambda r: r.config["images"].pop("ingest"))
    cluster = RecordingCluster()
    controller, published = _published(store, cluster)
    controller.reconcile("r1")
    ls = store.load_run("r1").layers["ingest-L2"]
    assert cluster.creates == []
    assert ls.phase == "failed" and "images.ingest" in ls.failure_reason
    assert [k for k, _ in published] == ["layer_failed"]


def test_unreachable_cluster_writes_nothing(store, run):
    class Unreachable(RecordingCluster):
        def validate_job(self, manifest):
            raise ClusterUnreachableError("cannot reach the API server at https://10.0.0.1")

    cluster = Unreachable()
    with pytest.raises(ClusterUnreachableError):
        Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconcile("r1")
    assert store.load_run("r1").version == 0


def _with_failed_index(store, cluster) -> str:
    """Start layer 2, then let its Job report index 1 failed; returns the Job name."""
    Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconcile("r1")
    name = store.load_run("r1").layers["ingest-L2"].job.name
    cluster.finish(name, failed_indexes="1")
    return name


def test_failed_index_alert_carries_chunks_and_the_log_tail(store, run):
    cluster = PodCluster()
    job = _with_failed_index(store, cluster)
    versions: list[int] = []
    cluster.on_log_read = lambda: versions.append(store.load_run("r1").version)
    controller, published = _published(store, cluster)
    controller.reconcile("r1")
    [(kind, body)] = published
    assert kind == "failed_indexes" and body["indexes"] == "1"
    [batch] = body["batches"]
    assert batch["index"] == 1 and batch["chunks"]
    assert batch["log_tail"] == f"traceback of {job}-1-x"
    # Fetched while publishing, after the decision was committed (version 1 -> 2).
    assert versions == [2]


@pytest.mark.parametrize(
    "error",
    [ClusterError("pods/x/log: 404 Not Found"), ClusterError("500 Internal"), OSError("reset")],
)
def test_unreadable_log_never_fails_the_reconcile(store, run, error):
    cluster = PodCluster(log_error=error)
    _with_failed_index(store, cluster)
    controller, published = _published(store, cluster)
    controller.reconcile("r1")
    assert cluster.log_reads  # it tried
    [(kind, body)] = published
    assert kind == "failed_indexes" and body["batches"][0]["log_tail"] == ""
    assert store.unsent_alerts("r1") == []


def test_budget_guard_prices_with_the_controllers_rate_table(store, run):
    """The controller's rate table prices the run inside the pure core: at $1 per vCPU-second
    any recorded usage passes a one-cent budget, so the run is paused and its Job suspended."""
    cluster = RecordingCluster()
    store.update_run("r1", lambda r: setattr(r, "budget_usd", 0.01))
    Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconcile("r1")
    store.update_run("r1", lambda r: setattr(r.layers["ingest-L2"].pods, "cpu_seconds", 5.0))
    region = load_config(DEMO).region
    dear = (RateRow(region, "general-purpose", 3600.0, 3600.0, 0.0, 0.0, 0.0),)
    controller, published = _published(store, cluster, rates=dear, now=NOW + timedelta(seconds=1))
    controller.reconcile("r1")
    state = store.load_run("r1")
    assert state.status == "paused" and state.budget_alerted
    job = state.layers["ingest-L2"].job.name
    assert (job, None, True) in cluster.patches
    assert [k for k, _ in published] == ["budget_reached"]


def test_a_pause_suspends_then_drains_each_job_scoped_to_the_runs_graph(store, run):
    """`pipeline pause`: the running layer's Job is suspended and then drained (its pods go at
    once), the drain scoped to the run's graph label; resuming drains nothing."""
    cluster = RecordingCluster()
    controller = Controller(store, cluster, lambda *a: None, clock=lambda: NOW)
    controller.reconcile("r1")
    job = store.load_run("r1").layers["ingest-L2"].job.name
    store.update_run("r1", ops.pause)
    controller.reconcile("r1")
    scope = {"cave-pipeline/graph": label_value(run.graph_id)}
    assert cluster.patches[-1] == (job, None, True) and cluster.drains == [(job, scope)]
    store.update_run("r1", ops.resume)
    controller.reconcile("r1")
    assert cluster.patches[-1] == (job, None, False) and len(cluster.drains) == 1


def test_a_deleted_layers_job_is_deleted_scoped_to_the_runs_graph(store, run):
    cluster = RecordingCluster()
    controller = Controller(store, cluster, lambda *a: None, clock=lambda: NOW)
    controller.reconcile("r1")
    job = store.load_run("r1").layers["ingest-L2"].job.name
    store.update_run("r1", lambda r: ops.cancel(r, "ingest", 2, "alice", NOW))
    controller.reconcile("r1")
    assert cluster.deletes == [(job, {"cave-pipeline/graph": label_value(run.graph_id)})]


class RunFailingCluster(RecordingCluster):
    """Refuses every call about the Jobs of the runs in `broken` (with `error`)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.broken: set[str] = set()

    def validate_job(self, manifest: dict[str, Any]) -> None:
        if manifest["metadata"]["annotations"]["cave-pipeline/run-id"] in self.broken:
            raise self.error
        super().validate_job(manifest)

    def get_job(self, name: str):
        manifest = self.manifests.get(name)
        if manifest and manifest["metadata"]["annotations"]["cave-pipeline/run-id"] in self.broken:
            raise self.error
        return super().get_job(name)


def _two_runs(store) -> None:
    cfg = load_config(DEMO)
    for run_id in ("bad", "good"):
        run = new_run(cfg, run_id, ["ingest"], "auto", NOW)
        run.setups.clear()  # layer 2 is what these tests watch start
        store.create_run(run)


def test_a_failing_run_never_holds_up_the_others_on_ticks(store):
    """The run that raises ("bad", reconciled first) is logged, counted and skipped; the
    other is reconciled on every tick; `run_unhealthy` goes out once, at the fifth failure,
    and again only after a success ended the spell."""
    _two_runs(store)
    cluster = RunFailingCluster(ClusterError("jobs.batch is forbidden: 403"))
    cluster.broken.add("bad")
    controller, published = _published(store, cluster)
    for tick in range(1, 8):
        results = controller.on_tick()
        assert [r.run_id for r in results] == ["good"]
        assert store.reconcile_health("bad")["failures"] == tick
    assert store.load_run("good").layers["ingest-L2"].phase == "running"
    assert store.load_run("bad").version == 0
    [(kind, body)] = [p for p in published if p[0] == "run_unhealthy"]
    assert body["run_id"] == "bad" and body["failures"] == 5 and "403" in body["error"]
    assert store.reconcile_health("good") is None

    cluster.broken.clear()
    assert sorted(r.run_id for r in controller.on_tick()) == ["bad", "good"]
    assert store.reconcile_health("bad") is None
    cluster.broken.add("bad")
    for _ in range(5):
        controller.on_tick()
    assert [k for k, _ in published].count("run_unhealthy") == 2


def test_run_unhealthy_survives_a_failed_publish(store):
    """`run_unhealthy` goes through the outbox: a publish that fails when the alert falls due
    is retried on the next failed reconcile, and the alert goes out once."""
    _two_runs(store)
    cluster = RunFailingCluster(ClusterError("jobs.batch is forbidden: 403"))
    cluster.broken.add("bad")
    published: list[tuple[str, dict[str, Any]]] = []
    down = {"alerts"}

    def publish(kind: str, body: dict[str, Any]) -> None:
        if down:
            raise ConnectionError("alerts topic unreachable")
        published.append((kind, body))

    controller = Controller(store, cluster, publish, clock=lambda: NOW)
    for _ in range(5):
        controller.on_tick()
    assert store.reconcile_health("bad")["alerted"] and published == []
    down.clear()
    controller.on_tick()
    controller.on_tick()
    [(kind, body)] = published
    assert kind == "run_unhealthy" and body["run_id"] == "bad" and body["failures"] == 5


def test_a_tick_is_retried_only_when_every_run_failed_transiently(store):
    _two_runs(store)
    cluster = RunFailingCluster(ClusterUnreachableError("cannot reach the API server"))
    cluster.broken.update({"bad", "good"})
    controller, _ = _published(store, cluster)
    with pytest.raises(ClusterUnreachableError):
        controller.on_tick()
    assert store.reconcile_health("good")["failures"] == 1
    cluster.broken.discard("good")
    assert [r.run_id for r in controller.on_tick()] == ["good"]
    cluster.error = ClusterError("a permanent refusal")
    cluster.broken.add("good")
    assert controller.on_tick() == []  # acknowledged: redelivery would not help


def _outbox(store, n: int) -> None:
    """Put n alerts in run r1's outbox (one commit, as a decision would)."""
    before = store.load_run("r1")
    after = store.load_run("r1")
    bodies = [{"kind": "layer_stalled", "run_id": "r1", "n": i} for i in range(n)]
    store.commit(before, after, bodies)


def test_concurrent_flushes_publish_each_alert_once(store, run):
    """Four flushers of one outbox at once (job-events, ticks, kick and the tail watch):
    each entry is taken under a precondition, so each alert is published exactly once,
    and carries its outbox id for subscribers to dedupe on."""
    _outbox(store, 10)
    published: list[dict[str, Any]] = []
    lock = threading.Lock()

    def publish(kind: str, body: dict[str, Any]) -> None:
        time.sleep(0.02)  # a real publish takes a round trip: the flushers overlap
        with lock:
            published.append(body)

    controllers = [
        Controller(store, RecordingCluster(), publish, clock=lambda: NOW) for _ in range(4)
    ]
    barrier = threading.Barrier(len(controllers))

    def go(c: Controller) -> None:
        barrier.wait()
        c.flush_alerts("r1")

    threads = [threading.Thread(target=go, args=(c,)) for c in controllers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ids = [b["alert_id"] for b in published]
    assert sorted(b["n"] for b in published) == list(range(10))
    assert len(set(ids)) == 10
    assert store.unsent_alerts("r1") == []


def test_a_take_whose_publisher_died_is_published_later(store, run, monkeypatch):
    """At least once: an entry taken by a publisher that never published is left alone while
    the take is fresh, and published once it lapses."""
    import adapters.google.firestore_outbox as fs

    _outbox(store, 1)
    [alert] = store.unsent_alerts("r1")
    assert store.take_alert("r1", alert, "dead-flusher")
    controller, published = _published(store, RecordingCluster())
    assert controller.flush_alerts("r1") == 0
    monkeypatch.setattr(fs, "ALERT_TAKE_S", -60.0)
    assert controller.flush_alerts("r1") == 1
    assert [b["alert_id"] for _, b in published] == [alert.alert_id]


def test_a_failed_publish_gives_the_alert_back(store, run):
    _outbox(store, 1)

    def down(kind: str, body: dict[str, Any]) -> None:
        raise ConnectionError("pubsub unreachable")

    with pytest.raises(ConnectionError):
        Controller(store, RecordingCluster(), down, clock=lambda: NOW).flush_alerts("r1")
    controller, published = _published(store, RecordingCluster())
    assert controller.flush_alerts("r1") == 1 and len(published) == 1


class PausingCluster(RecordingCluster):
    """Runs `on_get_job` once, the first time a Job is read (between the controller's read
    of the run and its act)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_get_job = None

    def get_job(self, name: str):
        hook, self.on_get_job = self.on_get_job, None
        if hook is not None:
            hook()
        return super().get_job(name)


def test_an_unchanged_decision_acts_only_on_rechecked_state(store, run):
    """A reconcile that would resume a suspended Job (nothing to commit) re-checks the run's
    version before acting: an operator's pause between its read and its act wins."""
    cluster = PausingCluster()
    controller, _ = _published(store, cluster)
    controller.reconcile("r1")
    job = store.load_run("r1").layers["ingest-L2"].job.name
    cluster.finish(job, suspended=True)
    cluster.on_get_job = lambda: store.update_run("r1", lambda r: setattr(r, "status", "paused"))
    controller.reconcile("r1")
    assert store.load_run("r1").status == "paused"
    assert (job, None, False) not in cluster.patches
    assert cluster.jobs[job].suspended


def test_a_leftover_job_of_a_purged_run_is_never_adopted(store, run):
    """Under the planned name the cluster holds a Complete Job of an earlier run of the same
    id (the create found it "exists"): the layer fails naming it, never succeeds, with a
    `layer_failed` alert, and the leftover is neither patched nor deleted."""
    cluster = RecordingCluster()
    controller, published = _published(store, cluster)
    controller.reconcile("r1")
    ls = store.load_run("r1").layers["ingest-L2"]
    ours = cluster.jobs[ls.job.name]
    assert ours.annotations["cave-pipeline/attempt"] == "0"
    earlier = {**ours.annotations, "cave-pipeline/run-created": "2025-01-01T00:00:00+00:00"}
    cluster.finish(
        ls.job.name,
        annotations=earlier,
        condition="Complete",
        completed_indexes=f"0-{ls.job.completions - 1}",
        completion_time=NOW,
    )
    controller.reconcile("r1")
    ls = store.load_run("r1").layers["ingest-L2"]
    assert ls.phase == "failed" and ls.progress.completed_indexes == ""
    assert f"Job {ls.job.name} belongs to an earlier run r1" in ls.failure_reason
    assert [k for k, _ in published] == ["layer_failed"]
    assert "purge that run" in published[0][1]["reason"]
    assert ls.job.name in cluster.jobs and cluster.patches == []


class RetriedPods(RecordingCluster):
    """Each failed index's attempts: `retries + 1` pods, all exit 1, each logging `errors[i]`
    (in order; the last repeats), as PyChunkedGraph's meshing retries every exception."""

    def __init__(self, errors: list[str], retries: int = 3) -> None:
        super().__init__()
        self.errors, self.retries = errors, retries

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        if index is None:
            return []
        return [
            PodInfo(
                f"{job_name}-{index}-a{n}",
                f"u{index}-{n}",
                job_name,
                index,
                "Failed",
                1,
                1,
                created=NOW + timedelta(seconds=n),
                exit_code=1,
                reason="Error",
            )
            for n in range(self.retries + 1)
        ]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        n = int(pod_name.rsplit("-a", 1)[1])
        error = self.errors[min(n, len(self.errors) - 1)]
        return f'Traceback (most recent call last):\n  File "w.py", line 1\n{error}\n'


@pytest.mark.parametrize(
    ("errors", "failure", "repeated"),
    [
        (["ValueError: no supervoxels in chunk"], "same_every_attempt", [1]),
        (["ServiceUnavailable: 503", "ValueError: no supervoxels in chunk"], "varying", []),
    ],
)
def test_a_batch_that_fails_the_same_way_on_every_attempt_is_reported_so(
    store, run, errors, failure, repeated
):
    cluster = RetriedPods(errors)
    _with_failed_index(store, cluster)
    controller, published = _published(store, cluster)
    controller.reconcile("r1")
    [(kind, body)] = published
    assert kind == "failed_indexes"
    [batch] = body["batches"]
    assert (batch["failure"], batch["attempts"], batch["exit_codes"]) == (failure, 4, [1] * 4)
    assert batch["log_tail"].endswith(f"{errors[-1]}\n")  # the latest attempt's
    assert body["same_every_attempt_indexes"] == repeated
    assert (batch["error"] == errors[0]) is (failure == "same_every_attempt")
