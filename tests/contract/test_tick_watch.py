"""The tick function's tail watch (shared/advance_watch.py) through functions-framework,
against the Firestore and Pub/Sub emulators: a layer that completes after the tick's
reconcile, with no Job event at all, advances before the tick returns."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from shared.adapters import wiring
from shared.adapters.google.firestore_store import FirestoreRunStore
from shared.adapters.google.pubsub_bus import TOPICS, PubSubBus
from shared.cluster import JobStatus
from tests.builders.cloud_events import client, envelope, kick, start_run
from tests.builders.fakes import RecordingCluster


class CompletesAfterGets(RecordingCluster):
    """Marks `job` Complete once `get_job` has been called `after` times since `arm()`:
    the tick's own reconcile makes the first call, the watch's first poll the next."""

    def __init__(self) -> None:
        super().__init__()
        self.target: tuple[str, int] | None = None  # (job, last index)
        self.gets = self.after = 0

    def arm(self, job: str, completions: int, after: int) -> None:
        self.gets, self.after, self.target = 0, after, (job, completions - 1)

    def get_job(self, name: str) -> JobStatus | None:
        status = super().get_job(name)
        if self.target is not None and name == self.target[0]:
            self.gets += 1
            if self.gets == self.after:
                self.finish(
                    name,
                    condition="Complete",
                    completion_time=datetime.now(UTC),
                    completed_indexes=f"0-{self.target[1]}",
                    succeeded=self.target[1] + 1,
                )
        return status


@pytest.fixture
def env(firestore_project, monkeypatch):
    monkeypatch.setenv("PIPELINE_PROJECT", firestore_project)
    monkeypatch.setenv("PIPELINE_TICK_PERIOD_S", "30")  # a 20 s watch with 3 s polls
    bus = PubSubBus(firestore_project)
    for topic in TOPICS:
        bus.ensure_topic(topic)
    cluster = CompletesAfterGets()
    wiring.use_cluster(cluster, done_markers=None)  # no worker runs: no done markers
    yield FirestoreRunStore(firestore_project), cluster
    wiring.use_cluster(None)
    bus.close()


def tail_of_layer_2(store: FirestoreRunStore, cluster: CompletesAfterGets) -> tuple[str, str, int]:
    """Start a run and bring its layer 2 to its last index (recorded by a kick)."""
    run_id = start_run(store)
    assert kick(run_id) == 200
    ls = store.load_run(run_id).layers["ingest-L2"]
    n = ls.completions
    cluster.finish(ls.job_name, completed_indexes=f"0-{n - 2}", succeeded=n - 1, active=1)
    assert kick(run_id) == 200
    assert store.load_run(run_id).layers["ingest-L2"].completed_indexes == f"0-{n - 2}"
    return run_id, ls.job_name, n


def tick() -> float:
    headers, body = envelope(json.dumps({"at": "now"}).encode(), "ticks")
    started = time.monotonic()
    assert client("on_tick").post("/", headers=headers, data=body).status_code == 200
    return time.monotonic() - started


def test_the_tick_advances_a_layer_that_completes_during_its_watch(env) -> None:
    store, cluster = env
    run_id, job, n = tail_of_layer_2(store, cluster)
    cluster.arm(job, n, after=2)  # Complete at the watch's first poll, seen at its second
    elapsed = tick()
    run = store.load_run(run_id)
    assert run.layers["ingest-L2"].phase == "succeeded"
    assert run.layers["ingest-L3"].phase == "running"
    assert run.layers["ingest-L3"].job_name in cluster.creates
    assert elapsed < 20.0  # back as soon as nothing is near its end any more


def test_without_the_watch_the_layer_waits_for_the_next_tick(env, monkeypatch) -> None:
    store, cluster = env
    monkeypatch.setenv("PIPELINE_WATCH_BUDGET_S", "0")
    run_id, job, n = tail_of_layer_2(store, cluster)
    cluster.arm(job, n, after=2)
    tick()
    assert store.load_run(run_id).layers["ingest-L3"].phase == "waiting"
