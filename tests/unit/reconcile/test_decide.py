"""The pure reconcile decision, table-driven: snapshot + plan + clock -> actions; and
`reject`, which takes refused Job creations back."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def make_run(advance: str = "auto", stages=("ingest",), tops=None, status="running") -> RunState:
    tops = tops or {s: 4 for s in stages}
    return RunState(
        run_id="r1",
        graph_id="g",
        stages=list(stages),
        top_layers=tops,
        advance=advance,
        status=status,
        layers=build_layers(list(stages), tops),
    )


def plans(run: RunState, completions: int = 10, stall_after_s: float = 1800.0) -> Plan:
    layers = {
        k: LayerPlan(completions, RAMP, job_name=name_for(ls)) for k, ls in run.layers.items()
    }
    return Plan(layers, stall_after_s)


def job(name: str, **kw) -> JobStatus:
    base = dict(
        name=name, labels={}, annotations={}, completions=10, parallelism=2, suspended=False
    )
    return JobStatus(**{**base, **kw})


def name_for(ls) -> str:
    return f"job-{ls.stage}-{ls.layer}-{ls.job.attempt}"


def run_decide(run, jobs=None, now=T0, completions=10, stall_after_s=1800.0) -> Decision:
    return decide(Snapshot(run, jobs or {}), plans(run, completions, stall_after_s), None, now)


@pytest.mark.parametrize(
    ("start", "factor", "max_", "completions", "elapsed", "want"),
    [
        (2, 2, 16, 100, 0, 2),
        (2, 2, 16, 100, 59, 2),
        (2, 2, 16, 100, 60, 4),
        (2, 2, 16, 100, 180, 16),
        (2, 2, 16, 100, 10**7, 16),  # a multi-day run: capped, no overflow
        (2, 2, 16, 5, 600, 5),  # never above completions
        (8, 2, 4, 100, 0, 4),  # start above max: max wins
        (1, 1.5, 10, 100, 120, 2),  # 1 * 1.5**2 = 2.25 -> 2
        (2, 1.05, 256, 10**4, 60 * 64, 45),  # 2 * 1.05**64 = 45.4: still ramping after 64 steps
        (2, 1.05, 256, 10**4, 60 * 100, 256),  # 2 * 1.05**100 = 263 -> the cap (was 22 forever)
        (4, 1, 256, 10**4, 10**7, 4),  # factor 1: a flat ramp
    ],
)
def test_ramp_target(start, factor, max_, completions, elapsed, want):
    ramp = Ramp(start=start, factor=factor, period=60, max=max_)
    assert ramp_target(ramp, completions, T0, T0 + timedelta(seconds=elapsed)) == want


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(1, 500),
    factor=st.floats(1.0001, 10.0),
    max_=st.integers(1, 100_000),
    completions=st.integers(1, 10**6),
)
def test_ramp_reaches_its_cap_for_every_factor_above_one(start, factor, max_, completions):
    """However slow the ramp, it reaches min(max, completions) and stays there, never above,
    and never goes down as time passes."""
    ramp = Ramp(start=start, factor=factor, period=60, max=max_)
    cap = min(max_, completions)
    enough = math.ceil(math.log(max(cap, 2) / start) / math.log(factor)) + 2 if cap > start else 0
    at = [
        ramp_target(ramp, completions, T0, T0 + timedelta(seconds=60 * k))
        for k in (0, enough // 2, enough, enough * 10 + 10**6)
    ]
    assert at == sorted(at)
    assert at[-2] == at[-1] == cap


def test_auto_starts_only_the_first_layer():
    d = run_decide(make_run())
    creates = [a for a in d.actions if isinstance(a, CreateJob)]
    assert [(c.stage, c.layer, c.parallelism) for c in creates] == [("ingest", 2, 2)]
    assert d.state.layers["ingest-L2"].phase == "running"
    assert d.state.layers["ingest-L3"].phase == "waiting"


@pytest.mark.parametrize(
    ("advance", "approved", "want_create", "want_alert"),
    [
        ("auto", False, True, False),
        ("approve", False, False, True),
        ("approve", True, True, False),
        ("manual", False, False, True),
        ("manual", True, True, False),
    ],
)
def test_advance_modes_gate_the_first_layer(advance, approved, want_create, want_alert):
    run = make_run(advance)
    run.layers["ingest-L2"].approval.granted = approved
    d = run_decide(run)
    assert any(isinstance(a, CreateJob) for a in d.actions) == want_create
    assert any(isinstance(a, Alert) and a.kind == "approval_needed" for a in d.actions) == (
        want_alert
    )


def test_approval_alert_is_sent_once():
    d1 = run_decide(make_run("approve"))
    d2 = run_decide(d1.state)
    assert [a.kind for a in d1.actions] == ["approval_needed"]
    assert d2.actions == []


def running(run: RunState, key: str) -> RunState:
    ls = run.layers[key]
    ls.phase, ls.job.name, ls.job.completions = "running", name_for(ls), 10
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = T0
    ls.job.parallelism = 2
    return run


def test_complete_job_advances_to_next_layer_in_one_reconcile():
    run = running(make_run(), "ingest-L2")
    done_at = T0 + timedelta(seconds=30)
    jobs = {
        "job-ingest-2-0": job(
            "job-ingest-2-0", condition="Complete", completed_indexes="0-9", completion_time=done_at
        )
    }
    d = run_decide(run, jobs, now=T0 + timedelta(seconds=31))
    assert d.state.layers["ingest-L2"].phase == "succeeded"
    assert [(a.layer) for a in d.actions if isinstance(a, CreateJob)] == [3]
    l3 = d.state.layers["ingest-L3"]
    assert l3.timing.eligible_at == done_at and l3.timing.submitted_at == T0 + timedelta(seconds=31)


def test_layer_never_starts_before_the_one_below_completes():
    run = running(make_run(), "ingest-L2")
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", completed_indexes="0-8", active=1)}
    d = run_decide(run, jobs)
    assert not any(isinstance(a, CreateJob) for a in d.actions)
    assert d.state.layers["ingest-L3"].phase == "waiting"


def test_missing_job_of_running_layer_is_recreated_with_same_name():
    run = running(make_run(), "ingest-L2")
    d = run_decide(run, {"job-ingest-2-0": None})
    assert d.actions == [CreateJob("ingest", 2, "job-ingest-2-0", 2, False)]


def test_ramp_patches_parallelism_absolutely_and_never_lowers():
    run = running(make_run(), "ingest-L2")
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", parallelism=2)}
    d = run_decide(run, jobs, now=T0 + timedelta(seconds=120))
    assert PatchJob("job-ingest-2-0", parallelism=8) in d.actions
    # A later reconcile with an older clock (skew) must not lower it.
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", parallelism=8)}
    d2 = run_decide(d.state, jobs, now=T0)
    assert not [a for a in d2.actions if isinstance(a, PatchJob)]


def test_scale_override_wins_over_ramp():
    run = running(make_run(), "ingest-L2")
    run.layers["ingest-L2"].job.scale_override = 1
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", parallelism=2)}
    d = run_decide(run, jobs, now=T0 + timedelta(seconds=600))
    assert PatchJob("job-ingest-2-0", parallelism=1) in d.actions


def test_failed_indexes_alerted_once_each():
    run = running(make_run(), "ingest-L2")
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", failed_indexes="3")}
    d1 = run_decide(run, jobs)
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", failed_indexes="3,5-6")}
    d2 = run_decide(d1.state, jobs)
    kinds = [
        (a.kind, a.details.get("indexes")) for a in d1.actions + d2.actions if isinstance(a, Alert)
    ]
    assert kinds == [("failed_indexes", [3]), ("failed_indexes", [5, 6])]


def test_failed_job_fails_layer_and_blocks_the_next():
    run = running(make_run(), "ingest-L2")
    jobs = {
        "job-ingest-2-0": job(
            "job-ingest-2-0",
            condition="Failed",
            reason="FailedIndexes",
            failed_indexes="4",
            completed_indexes="0-3,5-9",
        )
    }
    d = run_decide(run, jobs)
    assert d.state.layers["ingest-L2"].phase == "failed"
    assert any(isinstance(a, Alert) and a.kind == "layer_failed" for a in d.actions)
    d2 = run_decide(d.state, {})
    assert not any(isinstance(a, CreateJob) for a in d2.actions)


def test_pause_suspends_and_resume_unsuspends():
    run = running(make_run(status="paused"), "ingest-L2")
    jobs = {"job-ingest-2-0": job("job-ingest-2-0")}
    assert PatchJob("job-ingest-2-0", suspend=True) in run_decide(run, jobs).actions
    run.status = "running"
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", suspended=True)}
    assert PatchJob("job-ingest-2-0", suspend=False) in run_decide(run, jobs).actions


def test_paused_run_starts_nothing_new():
    run = make_run(status="paused")
    assert run_decide(run).actions == []


def test_stall_alert_after_no_progress():
    run = running(make_run(), "ingest-L2")
    jobs = {"job-ingest-2-0": job("job-ingest-2-0", completed_indexes="0")}
    d1 = run_decide(run, jobs, now=T0)
    later = T0 + timedelta(seconds=1801)
    d2 = run_decide(d1.state, jobs, now=later, stall_after_s=1800)
    d3 = run_decide(d2.state, jobs, now=later, stall_after_s=1800)
    assert [a.kind for a in d2.actions if isinstance(a, Alert)] == ["layer_stalled"]
    assert not [a for a in d3.actions if isinstance(a, Alert)]


def test_dag_meshing_and_l2cache_wait_for_ingest_then_run_in_parallel():
    run = make_run(
        stages=("ingest", "meshing", "l2cache"), tops={"ingest": 3, "meshing": 3, "l2cache": 2}
    )
    for key in ("ingest-L2", "ingest-L3"):
        run.layers[key].phase = "succeeded"
    d = run_decide(run)
    assert sorted((a.stage, a.layer) for a in d.actions if isinstance(a, CreateJob)) == [
        ("l2cache", 2),
        ("meshing", 2),
    ]


def test_migration_passes_in_order():
    run = make_run(stages=("migrate", "migrate_cleanup"), tops={"migrate_cleanup": 3, "migrate": 3})
    d = run_decide(run)
    assert [(a.stage, a.layer) for a in d.actions if isinstance(a, CreateJob)] == [("migrate", 2)]
    run.layers["migrate-L2"].phase = "succeeded"
    run.layers["migrate-L3"].phase = "succeeded"
    d = run_decide(run)
    assert [(a.stage, a.layer) for a in d.actions if isinstance(a, CreateJob)] == [
        ("migrate_cleanup", 2)
    ]


def test_all_layers_done_finishes_run_once():
    run = make_run()
    for ls in run.layers.values():
        ls.phase = "succeeded"
    d = run_decide(run)
    assert d.state.status == "succeeded"
    assert [a.kind for a in d.actions if isinstance(a, Alert)] == ["run_finished"]
    assert run_decide(d.state).actions == []


def test_decide_does_not_mutate_its_input():
    run = make_run()
    before = run.run_doc(), {k: v.to_doc() for k, v in run.layers.items()}
    run_decide(run)
    assert (run.run_doc(), {k: v.to_doc() for k, v in run.layers.items()}) == before


def test_operator_delete_removes_the_job_once_and_blocks_the_layer():
    from shared.operate import operator_actions as ops
    from shared.reconcile.decision import DeleteJob

    run = running(make_run(), "ingest-L2")
    ops.cancel(run, "ingest", 2, "ana", T0)
    d = run_decide(run, {"job-ingest-2-0": job("job-ingest-2-0")})
    assert d.actions == [DeleteJob("job-ingest-2-0")]
    assert d.state.layers["ingest-L2"].phase == "failed"
    assert run_decide(d.state, {}).actions == []
    ops.resubmit(d.state, "ingest", 2, "ana", T0)
    d2 = run_decide(d.state, {})
    assert [a.job_name for a in d2.actions if isinstance(a, CreateJob)] == ["job-ingest-2-1"]


def test_the_plan_names_the_job_of_the_layer_attempt():
    run = make_run()
    run.layers["ingest-L2"].job.attempt = 3
    d = run_decide(run)
    assert [a.job_name for a in d.actions if isinstance(a, CreateJob)] == ["job-ingest-2-3"]
    assert d.state.layers["ingest-L2"].job.name == "job-ingest-2-3"


# ---- reject ----------------------------------------------------------------------------
def _dag_start() -> Decision:
    """A decision that starts meshing L2 and l2cache L2 (ingest done)."""
    run = make_run(
        stages=("ingest", "meshing", "l2cache"), tops={"ingest": 2, "meshing": 3, "l2cache": 2}
    )
    run.layers["ingest-L2"].phase = "succeeded"
    return run_decide(run, now=T0 + timedelta(seconds=5))


@pytest.mark.parametrize(
    ("refused", "failed", "kept"),
    [
        ({}, [], ["job-meshing-2-0", "job-l2cache-2-0"]),
        ({"job-l2cache-2-0": "images.l2cache: no image"}, ["l2cache-L2"], ["job-meshing-2-0"]),
        (
            {"job-l2cache-2-0": "x", "job-meshing-2-0": "spec: invalid"},
            ["meshing-L2", "l2cache-L2"],
            [],
        ),
        (
            {"some-other-job": "not created by this decision"},
            [],
            ["job-meshing-2-0", "job-l2cache-2-0"],
        ),
    ],
)
def test_reject_fails_exactly_the_refused_layers(refused, failed, kept):
    decision = _dag_start()
    out = reject(decision, refused)
    assert sorted(a.job_name for a in out.actions if isinstance(a, CreateJob)) == sorted(kept)
    for key, ls in out.state.layers.items():
        if key in failed:
            assert ls.phase == "failed" and ls.timing.finished_at == decision.at
            assert ls.failure_reason == f"rejected: {refused[ls.job.name]}"
        else:
            assert ls.phase == decision.state.layers[key].phase
    alerts = [a for a in out.actions if isinstance(a, Alert) and a.kind == "layer_failed"]
    assert sorted(f"{a.stage}-L{a.layer}" for a in alerts) == sorted(failed)
    for a in alerts:
        assert (
            a.details["fix"] == f"correct the config, then `pipeline submit r1 {a.stage} {a.layer}`"
        )
    assert out.changed is (decision.changed or bool(failed))


def test_reject_leaves_its_input_alone():
    decision = _dag_start()
    before = list(decision.actions), decision.state.layers["l2cache-L2"].to_doc()
    reject(decision, {"job-l2cache-2-0": "no"})
    assert (decision.actions, decision.state.layers["l2cache-L2"].to_doc()) == before


def test_reject_fails_a_refused_recreate_and_the_layer_above_never_starts():
    run = running(make_run(), "ingest-L2")
    d = reject(run_decide(run, {"job-ingest-2-0": None}), {"job-ingest-2-0": "forbidden"})
    assert d.state.layers["ingest-L2"].phase == "failed"
    assert [a.kind for a in d.actions] == ["layer_failed"]
    assert not any(isinstance(a, CreateJob) for a in run_decide(d.state).actions)


# Behaviour of `shared.reconcile.decide.decide` that the mutation run found unchecked (issue 9):
# what a reconcile copies from the Job, the alerts' fields, when it acts at all, the pods it
# records and whether it reports a change. Table-driven where the cases share a shape.


STAGES = ("ingest", "l2cache", "meshing")


def run_of(stages=("ingest",), top=3, advance="auto", status="running") -> RunState:
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


def job_name_of(key: str) -> str:
    return f"job-{key}"


def plan(run: RunState, completions: int = 10, **kw) -> Plan:
    return Plan(
        {k: LayerPlan(completions, RAMP, job_name=job_name_of(k)) for k in run.layers}, **kw
    )


def running_layer(run: RunState, key: str = "ingest-L2") -> RunState:
    ls = run.layers[key]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = (
        "running",
        job_name_of(key),
        10,
        2,
    )
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = T0
    return run


def job_of(key: str = "ingest-L2", **kw) -> JobStatus:
    base = dict(
        name=job_name_of(key),
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
    run = running_layer(run_of())
    j = job_of(**job_kw)
    ls = decide(Snapshot(run, {j.name: j}), plan(run), None, T0 + timedelta(seconds=1)).state
    got = ls.layers["ingest-L2"]
    assert (got.progress.completed_indexes, got.progress.failed_indexes) == (
        j.completed_indexes,
        j.failed_indexes,
    )
    assert got.progress.active == want_active


def test_progress_moves_the_stall_clock_when_more_indexes_completed() -> None:
    run = running_layer(run_of())
    mark = run.layers["ingest-L2"].progress
    mark.count, mark.at, mark.stall_alerted = 2, T0, True
    now = T0 + timedelta(seconds=30)
    got = decide(
        Snapshot(run, {job_name_of("ingest-L2"): job_of(completed_indexes="0-4")}),
        plan(run),
        None,
        now,
    )
    ls = got.state.layers["ingest-L2"]
    assert (ls.progress.count, ls.progress.at, ls.progress.stall_alerted) == (5, now, False)


def test_newly_failed_indexes_are_alerted_with_the_layer_and_job_and_remembered() -> None:
    run = running_layer(run_of())
    run.layers["ingest-L2"].progress.alerted_indexes = "1"
    j = job_of(failed_indexes="1,3")
    d = decide(Snapshot(run, {j.name: j}), plan(run), None, T0)
    assert alerts(d) == [Alert("failed_indexes", "ingest", 2, {"indexes": [3], "job": j.name})]
    assert d.state.layers["ingest-L2"].progress.alerted_indexes == "1,3"


@pytest.mark.parametrize(
    ("status", "parallelism", "want"),
    [
        ("paused", 0, CreateJob("ingest", 2, job_name_of("ingest-L2"), 1, True)),
        ("running", 3, CreateJob("ingest", 2, job_name_of("ingest-L2"), 3, False)),
    ],
)
def test_a_missing_job_is_recreated_at_least_one_wide_and_suspended_if_paused(
    status, parallelism, want
) -> None:
    run = running_layer(run_of(status=status))
    run.layers["ingest-L2"].job.parallelism = parallelism
    assert decide(Snapshot(run, {}), plan(run), None, T0).actions == [want]


def test_a_foreign_job_fails_the_layer_with_its_reason_and_an_alert() -> None:
    run = running_layer(run_of())
    j = job_of(labels={"cave-pipeline/run": "another-run"})
    now = T0 + timedelta(seconds=5)
    d = decide(Snapshot(run, {j.name: j}), plan(run), None, now)
    ls = d.state.layers["ingest-L2"]
    assert (ls.phase, ls.timing.finished_at) == ("failed", now)
    assert "another-run" in ls.failure_reason
    reason = ls.failure_reason
    assert alerts(d) == [Alert("layer_failed", "ingest", 2, {"reason": reason, "fix": reason})]


@pytest.mark.parametrize(
    ("reason", "want"), [(None, "Failed"), ("BackoffLimitExceeded", "BackoffLimitExceeded")]
)
def test_a_failed_job_fails_the_layer_with_its_reason(reason, want) -> None:
    run = running_layer(run_of())
    j = job_of(condition="Failed", reason=reason, failed_indexes="4")
    d = decide(Snapshot(run, {j.name: j}), plan(run), None, T0)
    assert d.state.layers["ingest-L2"].failure_reason == want
    assert Alert("layer_failed", "ingest", 2, {"reason": want, "failed_indexes": "4"}) in d.actions


def test_the_stall_alert_fires_at_exactly_the_threshold_with_the_layer() -> None:
    run = running_layer(run_of())
    d = decide(
        Snapshot(run, {job_name_of("ingest-L2"): job_of()}),
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
    run = run_of(advance=advance)
    below = run.layers["ingest-L2"]
    below.phase, below.timing.finished_at = "succeeded", T0 + timedelta(seconds=10)
    ls = run.layers["ingest-L3"]
    ls.approval.granted, ls.approval.at = True, T0 + timedelta(seconds=approved_at_s)
    d = decide(Snapshot(run), plan(run), None, T0 + timedelta(seconds=100))
    assert d.state.layers["ingest-L3"].timing.eligible_at == T0 + timedelta(seconds=want_s)


# $1 per vCPU-second on Spot and $1 per cluster-second.
RATES = (RateRow("test", "general-purpose", 0.0, 3600.0, 0.0, 0.0, 3600.0),)


def test_the_budget_guard_suspends_only_running_layers_and_details_its_spend() -> None:
    run = running_layer(run_of(), "ingest-L3")
    run.layers["ingest-L3"].pods.cpu_seconds = 10.123456
    run.budget_usd = 1.0
    below = run.layers["ingest-L2"]
    below.phase, below.job.name = "succeeded", job_name_of("ingest-L2")
    below.timing.submitted_at, below.timing.finished_at = T0, T0
    jobs = {
        job_name_of("ingest-L2"): job_of("ingest-L2"),
        job_name_of("ingest-L3"): job_of("ingest-L3"),
    }
    d = decide(
        Snapshot(run, jobs), plan(run, billing=Billing("test")), RATES, T0 + timedelta(seconds=2)
    )
    patches = [a for a in d.actions if isinstance(a, PatchJob)]
    assert patches == [PatchJob(job_name_of("ingest-L3"), suspend=True)]
    (alert,) = alerts(d)
    assert alert.details["pods_usd"] == pytest.approx(10.123456)
    assert alert.details["cluster_fee_usd"] == pytest.approx(2.0)
    assert alert.details["spend_usd"] == 12.1235


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_a_finished_run_is_left_alone(status) -> None:
    run = running_layer(run_of(status=status))
    now = T0 + timedelta(seconds=9)
    d = decide(Snapshot(run, {}), plan(run), None, now)
    assert (d.state, d.actions, d.at, d.changed) == (run, [], now, False)


def test_a_delete_request_removes_the_job_once_and_the_other_layers_go_on() -> None:
    run = run_of(STAGES, top=2)
    run.layers["ingest-L2"].phase = "succeeded"
    run.layers["l2cache-L2"].job.delete_requested = True
    run.layers["l2cache-L2"].job.name = job_name_of("l2cache-L2")
    d = decide(Snapshot(run), plan(run), None, T0)
    assert d.state.layers["l2cache-L2"].job.delete_requested is False
    names = [(type(a).__name__, a.job_name) for a in d.actions]
    assert names == [
        ("DeleteJob", job_name_of("l2cache-L2")),
        ("CreateJob", job_name_of("meshing-L2")),
    ]


def _pod(phase: str, finished_s: float | None) -> PodInfo:
    finished = None if finished_s is None else T0 + timedelta(seconds=finished_s)
    job_of = job_name_of("ingest-L2")
    return pod_info(
        "u1", phase, name="p", job_name=job_of, created=T0, started=T0, finished=finished
    )


def test_the_finished_pods_of_a_listing_are_returned_to_store_and_counted() -> None:
    run = running_layer(run_of())
    done = _pod("Succeeded", 40)
    snap = Snapshot(run, {job_name_of("ingest-L2"): job_of()}, {job_name_of("ingest-L2"): [done]})
    d = decide(snap, plan(run), None, T0 + timedelta(seconds=50))
    assert d.pod_records == {"ingest-L2": [PodRecord.of(done)]}
    assert d.state.layers["ingest-L2"].pods.cpu_seconds == 40.0
    assert d.changed


def test_a_listing_with_nothing_finished_records_nothing() -> None:
    run = running_layer(run_of())
    snap = Snapshot(
        run,
        {job_name_of("ingest-L2"): job_of()},
        {job_name_of("ingest-L2"): [_pod("Running", None)]},
    )
    d = decide(snap, plan(run), None, T0 + timedelta(seconds=50))
    assert d.pod_records == {}
    assert d.state.layers["ingest-L2"].pods.running_cpu_seconds == 50.0


@pytest.mark.parametrize(
    ("job_kw", "want_cpu", "want_running"),
    [
        (dict(condition="Complete", completed_indexes="0-9"), 10.0 + 7.0, 0.0),  # closed
        (dict(), 10.0, 7.0),  # still running: its pods keep accruing
    ],
)
def test_a_layer_that_finishes_closes_its_running_pods_usage(job_kw, want_cpu, want_running):
    run = running_layer(run_of())
    pods = run.layers["ingest-L2"].pods
    pods.cpu_seconds, pods.running_cpu_seconds = 10.0, 7.0
    d = decide(Snapshot(run, {job_name_of("ingest-L2"): job_of(**job_kw)}), plan(run), None, T0)
    ls = d.state.layers["ingest-L2"]
    assert (ls.pods.cpu_seconds, ls.pods.running_cpu_seconds) == (want_cpu, want_running)


def test_the_approval_alert_names_the_layer_and_the_advance_mode() -> None:
    run = run_of(advance="approve")
    d = decide(Snapshot(run), plan(run), None, T0)
    assert alerts(d) == [Alert("approval_needed", "ingest", 2, {"advance": "approve"})]


def test_a_run_whose_layers_all_succeeded_finishes_and_says_so_once() -> None:
    run = run_of()
    for ls in run.layers.values():
        ls.phase = "succeeded"
    now = T0 + timedelta(seconds=3)
    d = decide(Snapshot(run), plan(run), None, now)
    assert (d.state.status, d.state.finished_at, d.state.finish_alerted) == ("succeeded", now, True)
    assert d.actions == [Alert("run_finished", details={"status": "succeeded"})]
    assert d.at == now and d.changed  # a change of the run document alone


def test_a_reconcile_that_changes_nothing_says_so() -> None:
    run = running_layer(run_of())
    run.layers["ingest-L2"].progress.active = 2
    d = decide(
        Snapshot(run, {job_name_of("ingest-L2"): job_of()}),
        plan(run),
        None,
        T0 + timedelta(seconds=1),
    )
    assert d.actions == [] and not d.changed


def test_a_rejected_creation_fails_its_layer_with_the_reason_and_is_a_change() -> None:
    run = run_of()
    create = CreateJob("ingest", 2, job_name_of("ingest-L2"), 2)
    d = reject(Decision(run, [create], T0, changed=False), {job_name_of("ingest-L2"): "bad image"})
    assert d.changed
    (alert,) = alerts(d)
    assert alert.details["reason"] == "rejected: bad image"
    assert d.state.layers["ingest-L2"].failure_reason == "rejected: bad image"


def test_a_reject_keeps_the_decisions_clock_and_pod_records() -> None:
    run = run_of()
    create = CreateJob("ingest", 2, job_name_of("ingest-L2"), 2)
    d = reject(Decision(run, [create], T0, {"x": []}), {job_name_of("ingest-L2"): "bad"})
    assert (d.at, d.pod_records) == (T0, {"x": []})


def test_pods_listed_for_a_missing_job_are_recorded_and_the_job_recreated() -> None:
    run = running_layer(run_of())
    done = _pod("Succeeded", 40)
    d = decide(Snapshot(run, {}, {job_name_of("ingest-L2"): [done]}), plan(run), None, at_s(50))
    assert d.pod_records == {"ingest-L2": [PodRecord.of(done)]}
    assert d.actions == [CreateJob("ingest", 2, job_name_of("ingest-L2"), 2, False)]


def at_s(s: float) -> datetime:
    return T0 + timedelta(seconds=s)
