"""The tick function's tail watch (shared/control/advance_watch.py) through functions-framework,
against the Firestore and Pub/Sub emulators: a layer that completes after the tick's
reconcile, with no Job event at all, advances before the tick returns; and ticks that come
late, twice at once or again never watch at the same time (docs/ticks-and-evictions.md)."""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime

import pytest

from adapters import wiring
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import TOPICS, PubSubBus
from adapters.local.eventarc import Dispatcher
from shared.ports.cluster import JobStatus
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
    with wiring.in_process_functions(cluster, done_markers=None):  # no worker runs: no done markers
        yield FirestoreRunStore(firestore_project), cluster
    bus.close()


def tail_of_layer_2(store: FirestoreRunStore, cluster: CompletesAfterGets) -> tuple[str, str, int]:
    """Start a run and bring its layer 2 to its last index (recorded by a kick)."""
    run_id = start_run(store)
    assert kick(run_id) == 200
    ls = store.load_run(run_id).layers["ingest-L2"]
    n = ls.job.completions
    cluster.finish(ls.job.name, completed_indexes=f"0-{n - 2}", succeeded=n - 1, active=1)
    assert kick(run_id) == 200
    assert store.load_run(run_id).layers["ingest-L2"].progress.completed_indexes == f"0-{n - 2}"
    return run_id, ls.job.name, n


def tick() -> None:
    headers, body = envelope(json.dumps({"at": "now"}).encode(), "ticks")
    assert client("on_tick").post("/", headers=headers, data=body).status_code == 200


def test_the_tick_advances_a_layer_that_completes_during_its_watch(env) -> None:
    store, cluster = env
    run_id, job, n = tail_of_layer_2(store, cluster)
    cluster.arm(job, n, after=2)  # Complete at the watch's first poll, seen at its second
    tick()
    run = store.load_run(run_id)
    assert run.layers["ingest-L2"].phase == "succeeded"
    assert run.layers["ingest-L3"].phase == "running"
    assert run.layers["ingest-L3"].job.name in cluster.creates
    # The tick's reconcile, two watch polls, the reconcile that advanced it; then nothing is
    # near its end and the watch returns (its timing is table-tested in test_advance_watch).
    assert cluster.gets == 4


def test_without_the_watch_the_layer_waits_for_the_next_tick(env, monkeypatch) -> None:
    store, cluster = env
    monkeypatch.setenv("PIPELINE_WATCH_BUDGET_S", "0")
    run_id, job, n = tail_of_layer_2(store, cluster)
    cluster.arm(job, n, after=2)
    tick()
    assert store.load_run(run_id).layers["ingest-L3"].phase == "waiting"


def test_a_layer_that_completes_after_the_budget_is_handed_to_on_kick(env, monkeypatch) -> None:
    """With 18 s ticks the watch reconciles for 12 s and hands off for 3 s more (a third of
    the period its margin, half of that the hand-offs' end): a layer seen complete after the
    budget is not reconciled by the tick but published as a kick (`tail-watch`), which
    on_kick reconciles."""
    store, cluster = env
    monkeypatch.setenv("PIPELINE_TICK_PERIOD_S", "18")
    bus = PubSubBus(store.db.project)
    kicks = bus.ensure_subscription("kick", "test-handoff-kicks")
    run_id, job, n = tail_of_layer_2(store, cluster)
    # The tick's reconcile is the first GET, the watch's polls (1 s apart) the next: complete
    # at the twelfth poll's GET (11 s or more into the tick), seen at the thirteenth, between
    # the budget's end (12 s) and the hand-offs' (15 s).
    cluster.arm(job, n, after=13)
    tick()
    assert store.load_run(run_id).layers["ingest-L3"].phase == "waiting"
    pulled = bus.subscriber.pull(subscription=kicks, max_messages=10, timeout=30)
    bodies = [json.loads(m.message.data) for m in pulled.received_messages]
    assert bodies == [{"run_id": run_id, "action": "tail-watch"}]
    headers, body = envelope(json.dumps(bodies[0]).encode(), "kick")
    assert client("on_kick").post("/", headers=headers, data=body).status_code == 200
    assert store.load_run(run_id).layers["ingest-L3"].phase == "running"
    bus.close()


# --- Ticks never watch into each other ---------------------------------------------------
# Through the local Eventarc stand-in (adapters/local/eventarc.py) on the Pub/Sub
# emulator, two instances of the tick function, and a fault hook that delays, duplicates and
# redelivers ticks. Counted from the function's own log lines, never from wall time.

PERIOD_S, BUDGET_S, POLL_S = 6.0, 3.0, 0.25


class WatchLog(logging.Handler):
    """The tick function's `tail watch ...` log lines, in the order they were written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = json.loads(record.getMessage())
        except ValueError:
            return
        if str(line.get("message", "")).startswith(("tail watch", "reconciled")):
            self.lines.append(line)

    def of(self, tick: str, message: str) -> list[dict]:
        return [x for x in self.lines if x.get("tick") == tick and x["message"] == message]

    def most_at_once(self) -> int:
        """The most watches running at the same moment, from the started/ended lines."""
        running = most = 0
        for line in self.lines:
            running += {"tail watch started": 1, "tail watch ended": -1}.get(line["message"], 0)
            most = max(most, running)
        return most


class TickFaults:
    """The dispatcher's fault hook: each tick's body names what happens to its delivery."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}  # case -> message id (the tick's id in the log)
        self.done: dict[str, threading.Event] = {}

    def __call__(self, sub: str, message, deliver) -> bool:
        case = json.loads(message.data)["case"]
        self.ids[case] = message.message_id
        done = self.done.setdefault(case, threading.Event())

        def run() -> None:
            if case == "twice-at-once":  # two instances get the same tick at the same time
                both = [threading.Thread(target=deliver) for _ in range(2)]
                [t.start() for t in both]
                [t.join() for t in both]
            elif case == "redelivered":  # delivered again after the first delivery returned
                deliver()
                deliver()
            else:  # "late": queued for longer than a tick period
                time.sleep(PERIOD_S + 0.5)
                deliver()
            done.set()

        threading.Thread(target=run, daemon=True).start()
        return True

    def wait(self, case: str) -> None:
        deadline = time.monotonic() + 60
        while case not in self.done and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.done[case].wait(60), f"tick {case!r} not delivered"


def test_late_redelivered_and_doubled_ticks_never_watch_at_once(env, monkeypatch) -> None:
    store, cluster = env
    project = store.db.project
    for key, value in (
        ("PIPELINE_TICK_PERIOD_S", PERIOD_S),
        ("PIPELINE_WATCH_BUDGET_S", BUDGET_S),
        ("PIPELINE_WATCH_POLL_S", POLL_S),
    ):
        monkeypatch.setenv(key, str(value))
    run_id, _, _ = tail_of_layer_2(store, cluster)  # its last index never completes
    bus = PubSubBus(project)
    bus.ensure_subscription("ticks", "ticks-fn")
    log, faults = WatchLog(), TickFaults()
    # The functions log `reconciled` (cave_pipeline.functions), the triggers the tail watch
    # (cave_pipeline.triggers): their parent hears both.
    logger = logging.getLogger("cave_pipeline")
    logger.addHandler(log)
    monkeypatch.setattr(logger, "level", logging.INFO)
    disabled = logging.root.manager.disable  # the suite may silence INFO globally
    logging.disable(logging.NOTSET)
    dispatcher = Dispatcher(project, {"ticks-fn": ("ticks", "on_tick")}, max_instances=2)
    dispatcher.fault_hook = faults
    dispatcher.start()
    try:
        bus.publish_json("ticks", {"case": "late"})
        bus.publish_json("ticks", {"case": "twice-at-once"})
        faults.wait("twice-at-once")
        bus.publish_json("ticks", {"case": "redelivered"})
        faults.wait("redelivered")
        faults.wait("late")
    finally:
        dispatcher.stop()
        logger.removeHandler(log)
        logging.disable(disabled)
        bus.close()
    ids = faults.ids
    # Every delivery reconciled the run (5 deliveries of 3 ticks).
    assert len([x for x in log.lines if x["message"] == "reconciled" and x["run"] == run_id]) == 5
    # Two deliveries of one tick at once: one watches, the other finds the lease taken.
    assert len(log.of(ids["twice-at-once"], "tail watch started")) == 1
    [busy] = log.of(ids["twice-at-once"], "tail watch skipped")
    assert busy["reason"] == "busy"
    # A redelivered tick: its first delivery watched the budget away, the second does not.
    assert len(log.of(ids["redelivered"], "tail watch started")) == 1
    [spent] = log.of(ids["redelivered"], "tail watch skipped")
    assert spent["reason"] == "spent" and spent["age_s"] >= BUDGET_S - POLL_S
    # A tick older than the period reconciles but does not watch.
    [late] = log.of(ids["late"], "tail watch skipped")
    assert late["reason"] == "late" and late["age_s"] > PERIOD_S
    assert not log.of(ids["late"], "tail watch started")
    assert len([x for x in log.lines if x["message"] == "tail watch started"]) == 2
    assert log.most_at_once() == 1
