"""The Firestore run store against the emulator (the controller on it: test_controller.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.google.firestore_layout import LAYERS, RUNS
from shared.control.controller import Controller
from shared.control.job_events import JobEvent
from shared.control.reconciler import ReconcileResult
from shared.control.triggers import Reconciles
from shared.model.phase import Phase
from shared.model.state import RunState, SetupState
from shared.ports.coalesce import Verdict
from shared.ports.run_store import RunExistsError, RunNotFoundError, StaleStateError
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import NOW


def test_create_load_roundtrip(store, run):
    loaded = store.load_run("r1")
    assert loaded.run_doc() == run.run_doc()
    assert {k: v.to_doc() for k, v in loaded.layers.items()} == {
        k: v.to_doc() for k, v in run.layers.items()
    }
    with pytest.raises(RunExistsError, match="already exists"):
        store.create_run(run)
    with pytest.raises(RunNotFoundError, match="pipeline runs"):
        store.load_run("nope")


def test_commit_requires_the_version_it_read(store, run):
    before = store.load_run("r1")
    after = store.load_run("r1")
    after.layers["ingest-L2"].phase = "running"
    after.layers["ingest-L2"].job.name = "job-a"
    store.commit(before, after, [{"kind": "approval_needed", "x": 1}])
    assert store.load_run("r1").version == 1
    assert store.run_for_job("job-a") == "r1"
    assert [a.kind for a in store.unsent_alerts("r1")] == ["approval_needed"]
    with pytest.raises(StaleStateError):
        store.commit(before, after)  # the same stale read again


def test_a_commit_maps_each_job_it_names_and_stores_the_phases_as_before(store, run):
    before, after = store.load_run("r1"), store.load_run("r1")
    ls = after.layers["ingest-L2"]
    ls.phase, ls.job.name = Phase.RUNNING, "job-layer"
    ls.canary.phase, ls.canary.job = Phase.SUCCEEDED, "job-layer-canary"
    after.setups["ingest"] = SetupState("ingest", Phase.SUCCEEDED, job_name="job-setup")
    store.commit(before, after)
    names = ("job-layer", "job-layer-canary", "job-setup")
    assert [store.run_for_job(n) for n in names] == ["r1"] * 3  # their events reach the run
    run_ref = store.db.collection(RUNS).document("r1")
    layer = run_ref.collection(LAYERS).document("ingest-L2").get().to_dict()
    assert (layer["phase"], layer["canary_phase"]) == ("running", "done")  # the canary's names
    assert run_ref.get().to_dict()["setups"]["ingest"]["phase"] == "succeeded"
    assert store.load_run("r1").layers["ingest-L2"].canary.phase is Phase.SUCCEEDED


def test_alert_outbox_marked_sent(store, run):
    before = store.load_run("r1")
    store.commit(before, store.load_run("r1"), [{"kind": "a"}, {"kind": "b"}])
    alerts = store.unsent_alerts("r1")
    store.mark_alerts_sent("r1", [alerts[0].alert_id])
    assert [a.kind for a in store.unsent_alerts("r1")] == [alerts[1].kind]


def test_dedupe_first_sighting(store):
    expires = NOW + timedelta(hours=1)
    assert store.first_sighting("evt-1", expires) is True
    assert store.first_sighting("evt-1", expires) is False
    assert store.first_sighting("evt-2", expires) is True


def test_active_runs_and_list(store, run):
    assert store.active_runs() == ["r1"]
    store.update_run("r1", lambda r: setattr(r, "status", "succeeded"))
    assert store.active_runs() == []
    assert [r.run_id for r in store.list_runs()] == ["r1"]


def test_reconcile_lease_coalesces_events(store):
    """Acquire, mark by a second instance, one follow-up, release, then covered/acquire."""
    t = lambda s: NOW + timedelta(seconds=s)  # noqa: E731
    assert store.lease_for_event("r9", t(0), "a", t(1)) == (Verdict.ACQUIRE, 0)
    assert store.lease_for_event("r9", t(1), "b", t(2)) == (Verdict.MARK, 1)
    assert store.lease_for_event("r9", t(2), "c", t(2)) == (Verdict.MARK, 2)
    # a's first reconcile read at t(1.5): two marks since, so exactly one more run for both
    seen = store.renew_or_release_lease("r9", "a", 0, t(1.5), 0, t(3))
    assert seen == 2
    assert store.renew_or_release_lease("r9", "a", seen, t(3), 1, t(4)) is None
    assert store.lease_for_event("r9", t(0.5), "d", t(5))[0] is Verdict.COVERED
    assert store.lease_for_event("r9", t(4), "d", t(5))[0] is Verdict.ACQUIRE
    store.abandon_lease("r9", "d")
    assert store.lease_for_event("r9", t(4), "e", t(6))[0] is Verdict.ACQUIRE


def test_pod_records_are_paged_and_read_back_once_per_uid(store, run):
    recs = [
        {"uid": f"u{i}", "phase": "Succeeded", "started": NOW, "finished": NOW, "seconds": 0.0}
        for i in range(1500)
    ]
    before = store.load_run("r1")
    after = store.load_run("r1")
    after.status = "paused"
    store.commit(before, after, pod_records={"ingest-L2": recs})
    # a losing racer's page repeats some pods: read back once each
    store._write_pod_records(store._run("r1"), 7, {"ingest-L2": recs[:10]})
    got = store.pod_records("r1", "ingest-L2")
    assert len(got) == 1500 and got[0]["finished"] == NOW
    pages = store._run("r1").collection("layers").document("ingest-L2").collection("pods")
    assert len(list(pages.stream())) == 3


def test_job_events_are_coalesced_by_the_controller(store, run):
    """An event older than the last completed reconcile's read is acknowledged without a
    reconcile; a newer one reconciles; one arriving while a holder runs marks it instead."""
    clock = [NOW]
    calls: list[str] = []
    counting = False  # the first reconcile below is the set-up, not one the triggers ran

    class Counted:
        def __init__(self, inner: Reconciles) -> None:
            self.inner = inner

        def reconcile(self, run_id: str) -> ReconcileResult:
            if counting:
                calls.append(run_id)
            return self.inner.reconcile(run_id)

    controller = Controller(
        store, RecordingCluster(), lambda *a: None, clock=lambda: clock[0], wrap_reconciler=Counted
    )
    controller.reconcile("r1")  # creates the layer-2 Job
    job = store.load_run("r1").layers["ingest-L2"].job.name
    counting = True

    def event(at_s: float, insert_id: str) -> JobEvent:
        stamp = NOW + timedelta(seconds=at_s)
        return JobEvent(insert_id, job, "default", "SuccessfulCreate", "", stamp)

    clock[0] = NOW + timedelta(seconds=10)
    assert controller.on_job_event(event(9, "a")) is not None and len(calls) == 1
    clock[0] = NOW + timedelta(seconds=20)
    assert controller.on_job_event(event(5, "b")) is None and len(calls) == 1  # covered
    assert controller.on_job_event(event(19, "c")) is not None and len(calls) == 2
    # someone else holds the lease: the event marks it and is acknowledged
    assert (
        store.lease_for_event("r1", NOW + timedelta(seconds=25), "other", clock[0])[0].value
        == "acquire"
    )
    assert controller.on_job_event(event(26, "d")) is None and len(calls) == 2
    assert store.renew_or_release_lease("r1", "other", 0, clock[0], 0, clock[0]) is not None


def test_each_role_adapter_reads_what_the_whole_store_wrote(store, run, firestore_project):
    """The run store split by role keeps one stored shape: each role's adapter, on a client
    of its own, sees the documents the all-roles store wrote, and the other way round."""
    from adapters.google.firestore_outbox import FirestoreOutbox
    from adapters.google.firestore_run_health import FirestoreRunHealth
    from adapters.google.firestore_runs import FirestoreRuns
    from adapters.google.firestore_sightings import FirestoreSightings
    from adapters.google.reconcile_lease import FirestoreReconcileLeases
    from adapters.google.watch_lease import FirestoreWatchLease

    runs = FirestoreRuns(firestore_project)
    assert runs.load_run("r1").run_doc() == store.load_run("r1").run_doc()
    runs.update_run("r1", lambda r: setattr(r, "status", "paused"))
    assert store.load_run("r1").status == "paused"

    health = FirestoreRunHealth(firestore_project)
    assert health.record_reconcile_failure("r1", "boom", NOW, alert_after=1).alert_due
    assert store.reconcile_health("r1")["failures"] == 1
    outbox = FirestoreOutbox(firestore_project)
    assert [a.kind for a in outbox.unsent_alerts("r1")] == ["run_unhealthy"]
    assert [a.kind for a in store.unsent_alerts("r1")] == ["run_unhealthy"]

    expires = NOW + timedelta(hours=1)
    assert FirestoreSightings(firestore_project).first_sighting("evt-r", expires) is True
    assert store.first_sighting("evt-r", expires) is False

    leases = FirestoreReconcileLeases(firestore_project)
    verdict, _ = leases.lease_for_event("r1", NOW, "a", NOW)
    assert verdict is Verdict.ACQUIRE
    assert store.lease_for_event("r1", NOW, "b", NOW)[0] is not Verdict.ACQUIRE
    watch = FirestoreWatchLease(firestore_project)
    assert watch.acquire_watch_lease("a", NOW + timedelta(minutes=1), NOW) is True
    assert store.acquire_watch_lease("b", NOW + timedelta(minutes=1), NOW) is False


def _running(before: RunState, job: str) -> RunState:
    """The state after `before` with layer 2 running `job` (a copy: no read of the store)."""
    after = RunState.from_docs(before.run_doc(), [ls.to_doc() for ls in before.layers.values()])
    ls = after.layers["ingest-L2"]
    ls.phase, ls.job.name = Phase.RUNNING, job
    return after


def test_a_commit_holds_to_the_update_time_its_load_read(store, run, firestore_project):
    """The commit's precondition is the update time load_run read (no second read of the run
    document): any write since, another client's commit or a health record (which keeps the
    version), makes it stale; decided again from a fresh load, it commits."""
    from adapters.google.firestore_run_health import FirestoreRunHealth
    from adapters.google.firestore_runs import FirestoreRuns

    other = FirestoreRuns(firestore_project)
    before = store.load_run("r1")
    FirestoreRunHealth(firestore_project).record_reconcile_failure("r1", "boom", NOW, 5)
    with pytest.raises(StaleStateError):
        store.commit(before, _running(before, "job-a"))
    # the stale commit forgot what it had seen: the load it retries from is the new one
    before = store.load_run("r1")
    store.commit(before, _running(before, "job-a"))
    assert store.load_run("r1").version == 1

    before = store.load_run("r1")
    theirs = other.load_run("r1")
    other.commit(theirs, _running(theirs, "job-b"))
    with pytest.raises(StaleStateError):
        store.commit(before, _running(before, "job-c"))
    assert store.load_run("r1").layers["ingest-L2"].job.name == "job-b"


def test_a_commit_from_its_own_last_write_needs_no_load(store, run):
    """After a commit the client knows the run document's new update time: a commit from the
    state it wrote goes through, and one from the state before it is stale."""
    first = store.load_run("r1")
    second = _running(first, "job-a")
    store.commit(first, second)
    third = _running(second, "job-b")
    store.commit(second, third)
    assert store.load_run("r1").version == 2
    with pytest.raises(StaleStateError):
        store.commit(second, third)


def test_a_successful_reconcile_ends_the_spell_its_load_saw(store, run, firestore_project):
    """record_reconcile_success clears the spell the run's last load saw (and, with nothing
    seen, reads the document itself); after a load that saw none it reads nothing, so a
    failure another instance records after that load is left for the next success."""
    from adapters.google.firestore_run_health import FirestoreRunHealth

    other = FirestoreRunHealth(firestore_project)
    store.record_reconcile_failure("r1", "boom", NOW, 5)
    store.load_run("r1")  # the reconcile's observe: the spell is there
    store.record_reconcile_success("r1")
    assert store.reconcile_health("r1") is None

    other.record_reconcile_failure("r1", "boom", NOW, 5)
    store.record_reconcile_success("r1")  # nothing seen since its own write: read, cleared
    assert store.reconcile_health("r1") is None

    store.load_run("r1")  # no spell
    other.record_reconcile_failure("r1", "late", NOW, 5)
    store.record_reconcile_success("r1")
    assert store.reconcile_health("r1")["error"] == "late"
    store.load_run("r1")  # the next tick's reconcile sees it and its success ends it
    store.record_reconcile_success("r1")
    assert store.reconcile_health("r1") is None
