"""Behaviour of `shared.reconcile.decide.decide` that the mutation run found unchecked (issue 9):
what a reconcile copies from the Job, the alerts' fields, when it acts at all, the pods it
records and whether it reports a change. Table-driven where the cases share a shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config.config import Ramp
from shared.model.state import RunState, build_layers
from shared.money.costs import Billing
from shared.money.pricing import RateRow
from shared.ports.cluster import JobStatus, PodInfo
from shared.reconcile.decide import decide, ramp_target, reject
from shared.reconcile.decision import (
    Alert,
    CreateJob,
    Decision,
    LayerPlan,
    PatchJob,
    Plan,
    Snapshot,
)
from shared.reconcile.pod_accounting import PodRecord
from tests.builders.pod_infos import pod_info

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RAMP = Ramp(start=2, factor=2, period=60, max=16)
STAGES = ("ingest", "l2cache", "meshing")


def make_run(stages=("ingest",), top=3, advance="auto", status="running") -> RunState:
    tops = {s: top for s in stages}
    return RunState(
        "r1",
        "g",
        list(stages),
        tops,
        advance=advance,
        status=status,
        created_at=T0,
        layers=build_layers(list(stages), tops),
    )


def name_for(key: str) -> str:
    return f"job-{key}"


def plan(run: RunState, completions: int = 10, **kw) -> Plan:
    return Plan({k: LayerPlan(completions, RAMP, job_name=name_for(k)) for k in run.layers}, **kw)


def running(run: RunState, key: str = "ingest-L2", **kw) -> RunState:
    ls = run.layers[key]
    ls.phase, ls.job_name, ls.completions, ls.parallelism = "running", name_for(key), 10, 2
    ls.submitted_at = ls.ramp_started_at = ls.progress_at = T0
    for k, v in kw.items():
        setattr(ls, k, v)
    return run


def job(key: str = "ingest-L2", **kw) -> JobStatus:
    base = dict(
        name=name_for(key),
        labels={},
        annotations={},
        completions=10,
        parallelism=2,
        suspended=False,
        active=2,
    )
    return JobStatus(**{**base, **kw})


def alerts(d: Decision) -> list[Alert]:
    return [a for a in d.actions if isinstance(a, Alert)]


def test_a_one_batch_layer_ramps_to_one_pod_whatever_the_ramp_start() -> None:
    assert ramp_target(RAMP, 1, None, T0) == 1
    assert ramp_target(RAMP, 1, T0, T0 + timedelta(hours=1)) == 1


@pytest.mark.parametrize(
    ("job_kw", "want_active"),
    [
        (dict(active=3, completed_indexes="0-4", failed_indexes="7"), 3),
        (dict(active=3, condition="Complete", completed_indexes="0-9"), 0),  # finished: none
    ],
)
def test_the_layer_copies_the_jobs_index_sets_and_active_pods(job_kw, want_active) -> None:
    run = running(make_run())
    j = job(**job_kw)
    ls = decide(Snapshot(run, {j.name: j}), plan(run), None, T0 + timedelta(seconds=1)).state
    got = ls.layers["ingest-L2"]
    assert (got.completed_indexes, got.failed_indexes) == (j.completed_indexes, j.failed_indexes)
    assert got.active == want_active


def test_progress_moves_the_stall_clock_when_more_indexes_completed() -> None:
    run = running(make_run(), progress_count=2, progress_at=T0, stall_alerted=True)
    now = T0 + timedelta(seconds=30)
    got = decide(
        Snapshot(run, {name_for("ingest-L2"): job(completed_indexes="0-4")}), plan(run), None, now
    )
    ls = got.state.layers["ingest-L2"]
    assert (ls.progress_count, ls.progress_at, ls.stall_alerted) == (5, now, False)


def test_newly_failed_indexes_are_alerted_with_the_layer_and_job_and_remembered() -> None:
    run = running(make_run(), alerted_indexes="1")
    j = job(failed_indexes="1,3")
    d = decide(Snapshot(run, {j.name: j}), plan(run), None, T0)
    assert alerts(d) == [Alert("failed_indexes", "ingest", 2, {"indexes": [3], "job": j.name})]
    assert d.state.layers["ingest-L2"].alerted_indexes == "1,3"


@pytest.mark.parametrize(
    ("status", "parallelism", "want"),
    [
        ("paused", 0, CreateJob("ingest", 2, name_for("ingest-L2"), 1, True)),
        ("running", 3, CreateJob("ingest", 2, name_for("ingest-L2"), 3, False)),
    ],
)
def test_a_missing_job_is_recreated_at_least_one_wide_and_suspended_if_paused(
    status, parallelism, want
) -> None:
    run = running(make_run(status=status), parallelism=parallelism)
    assert decide(Snapshot(run, {}), plan(run), None, T0).actions == [want]


def test_a_foreign_job_fails_the_layer_with_its_reason_and_an_alert() -> None:
    run = running(make_run())
    j = job(labels={"cave-pipeline/run": "another-run"})
    now = T0 + timedelta(seconds=5)
    d = decide(Snapshot(run, {j.name: j}), plan(run), None, now)
    ls = d.state.layers["ingest-L2"]
    assert (ls.phase, ls.finished_at) == ("failed", now)
    assert "another-run" in ls.failure_reason
    reason = ls.failure_reason
    assert alerts(d) == [Alert("layer_failed", "ingest", 2, {"reason": reason, "fix": reason})]


@pytest.mark.parametrize(
    ("reason", "want"), [(None, "Failed"), ("BackoffLimitExceeded", "BackoffLimitExceeded")]
)
def test_a_failed_job_fails_the_layer_with_its_reason(reason, want) -> None:
    run = running(make_run())
    j = job(condition="Failed", reason=reason, failed_indexes="4")
    d = decide(Snapshot(run, {j.name: j}), plan(run), None, T0)
    assert d.state.layers["ingest-L2"].failure_reason == want
    assert Alert("layer_failed", "ingest", 2, {"reason": want, "failed_indexes": "4"}) in d.actions


def test_the_stall_alert_fires_at_exactly_the_threshold_with_the_layer() -> None:
    run = running(make_run())
    d = decide(
        Snapshot(run, {name_for("ingest-L2"): job()}),
        plan(run, stall_after_s=100.0),
        None,
        T0 + timedelta(seconds=100),
    )
    assert alerts(d) == [Alert("layer_stalled", "ingest", 2, {"no_progress_s": 100})]


@pytest.mark.parametrize(
    ("advance", "approved_at_s", "want_s"),
    [
        ("approve", 50, 50),  # approved after the layer below finished: the approval
        ("approve", 5, 10),  # approved before: the layer below
        ("auto", 50, 10),  # auto: an approval stamp does not delay eligibility
    ],
)
def test_a_layer_is_eligible_from_its_dependencies_and_its_approval(
    advance, approved_at_s, want_s
) -> None:
    run = make_run(advance=advance)
    below = run.layers["ingest-L2"]
    below.phase, below.finished_at = "succeeded", T0 + timedelta(seconds=10)
    ls = run.layers["ingest-L3"]
    ls.approved, ls.approved_at = True, T0 + timedelta(seconds=approved_at_s)
    d = decide(Snapshot(run), plan(run), None, T0 + timedelta(seconds=100))
    assert d.state.layers["ingest-L3"].eligible_at == T0 + timedelta(seconds=want_s)


# $1 per vCPU-second on Spot and $1 per cluster-second.
RATES = (RateRow("test", "general-purpose", 0.0, 3600.0, 0.0, 0.0, 3600.0),)


def test_the_budget_guard_suspends_only_running_layers_and_details_its_spend() -> None:
    run = running(make_run(), "ingest-L3", cpu_seconds=10.123456)
    run.budget_usd = 1.0
    below = run.layers["ingest-L2"]
    below.phase, below.job_name = "succeeded", name_for("ingest-L2")
    below.submitted_at, below.finished_at = T0, T0
    jobs = {name_for("ingest-L2"): job("ingest-L2"), name_for("ingest-L3"): job("ingest-L3")}
    d = decide(
        Snapshot(run, jobs), plan(run, billing=Billing("test")), RATES, T0 + timedelta(seconds=2)
    )
    patches = [a for a in d.actions if isinstance(a, PatchJob)]
    assert patches == [PatchJob(name_for("ingest-L3"), suspend=True)]
    (alert,) = alerts(d)
    assert alert.details["pods_usd"] == pytest.approx(10.123456)
    assert alert.details["cluster_fee_usd"] == pytest.approx(2.0)
    assert alert.details["spend_usd"] == 12.1235


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_a_finished_run_is_left_alone(status) -> None:
    run = running(make_run(status=status))
    now = T0 + timedelta(seconds=9)
    d = decide(Snapshot(run, {}), plan(run), None, now)
    assert (d.state, d.actions, d.at, d.changed) == (run, [], now, False)


def test_a_delete_request_removes_the_job_once_and_the_other_layers_go_on() -> None:
    run = make_run(STAGES, top=2)
    run.layers["ingest-L2"].phase = "succeeded"
    run.layers["l2cache-L2"].delete_requested = True
    run.layers["l2cache-L2"].job_name = name_for("l2cache-L2")
    d = decide(Snapshot(run), plan(run), None, T0)
    assert d.state.layers["l2cache-L2"].delete_requested is False
    names = [(type(a).__name__, a.job_name) for a in d.actions]
    assert names == [("DeleteJob", name_for("l2cache-L2")), ("CreateJob", name_for("meshing-L2"))]


def _pod(phase: str, finished_s: float | None) -> PodInfo:
    finished = None if finished_s is None else T0 + timedelta(seconds=finished_s)
    job = name_for("ingest-L2")
    return pod_info("u1", phase, name="p", job_name=job, created=T0, started=T0, finished=finished)


def test_the_finished_pods_of_a_listing_are_returned_to_store_and_counted() -> None:
    run = running(make_run())
    done = _pod("Succeeded", 40)
    snap = Snapshot(run, {name_for("ingest-L2"): job()}, {name_for("ingest-L2"): [done]})
    d = decide(snap, plan(run), None, T0 + timedelta(seconds=50))
    assert d.pod_records == {"ingest-L2": [PodRecord.of(done)]}
    assert d.state.layers["ingest-L2"].cpu_seconds == 40.0
    assert d.changed


def test_a_listing_with_nothing_finished_records_nothing() -> None:
    run = running(make_run())
    snap = Snapshot(
        run, {name_for("ingest-L2"): job()}, {name_for("ingest-L2"): [_pod("Running", None)]}
    )
    d = decide(snap, plan(run), None, T0 + timedelta(seconds=50))
    assert d.pod_records == {}
    assert d.state.layers["ingest-L2"].running_cpu_seconds == 50.0


@pytest.mark.parametrize(
    ("job_kw", "want_cpu", "want_running"),
    [
        (dict(condition="Complete", completed_indexes="0-9"), 10.0 + 7.0, 0.0),  # closed
        (dict(), 10.0, 7.0),  # still running: its pods keep accruing
    ],
)
def test_a_layer_that_finishes_closes_its_running_pods_usage(job_kw, want_cpu, want_running):
    run = running(make_run(), cpu_seconds=10.0, running_cpu_seconds=7.0)
    d = decide(Snapshot(run, {name_for("ingest-L2"): job(**job_kw)}), plan(run), None, T0)
    ls = d.state.layers["ingest-L2"]
    assert (ls.cpu_seconds, ls.running_cpu_seconds) == (want_cpu, want_running)


def test_the_approval_alert_names_the_layer_and_the_advance_mode() -> None:
    run = make_run(advance="approve")
    d = decide(Snapshot(run), plan(run), None, T0)
    assert alerts(d) == [Alert("approval_needed", "ingest", 2, {"advance": "approve"})]


def test_a_run_whose_layers_all_succeeded_finishes_and_says_so_once() -> None:
    run = make_run()
    for ls in run.layers.values():
        ls.phase = "succeeded"
    now = T0 + timedelta(seconds=3)
    d = decide(Snapshot(run), plan(run), None, now)
    assert (d.state.status, d.state.finished_at, d.state.finish_alerted) == ("succeeded", now, True)
    assert d.actions == [Alert("run_finished", details={"status": "succeeded"})]
    assert d.at == now and d.changed  # a change of the run document alone


def test_a_reconcile_that_changes_nothing_says_so() -> None:
    run = running(make_run(), active=2)
    d = decide(
        Snapshot(run, {name_for("ingest-L2"): job()}), plan(run), None, T0 + timedelta(seconds=1)
    )
    assert d.actions == [] and not d.changed


def test_a_rejected_creation_fails_its_layer_with_the_reason_and_is_a_change() -> None:
    run = make_run()
    create = CreateJob("ingest", 2, name_for("ingest-L2"), 2)
    d = reject(Decision(run, [create], T0, changed=False), {name_for("ingest-L2"): "bad image"})
    assert d.changed
    (alert,) = alerts(d)
    assert alert.details["reason"] == "rejected: bad image"
    assert d.state.layers["ingest-L2"].failure_reason == "rejected: bad image"


def test_a_reject_keeps_the_decisions_clock_and_pod_records() -> None:
    run = make_run()
    create = CreateJob("ingest", 2, name_for("ingest-L2"), 2)
    d = reject(Decision(run, [create], T0, {"x": []}), {name_for("ingest-L2"): "bad"})
    assert (d.at, d.pod_records) == (T0, {"x": []})


def test_pods_listed_for_a_missing_job_are_recorded_and_the_job_recreated() -> None:
    run = running(make_run())
    done = _pod("Succeeded", 40)
    d = decide(Snapshot(run, {}, {name_for("ingest-L2"): [done]}), plan(run), None, at_s(50))
    assert d.pod_records == {"ingest-L2": [PodRecord.of(done)]}
    assert d.actions == [CreateJob("ingest", 2, name_for("ingest-L2"), 2, False)]


def at_s(s: float) -> datetime:
    return T0 + timedelta(seconds=s)
