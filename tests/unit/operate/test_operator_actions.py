"""Operator actions as pure mutations of a run's state, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.model.state import RunState, build_layers
from shared.operate import operator_actions as ops

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_run(status: str = "running", phases: dict[str, str] | None = None) -> RunState:
    tops = {"ingest": 4, "meshing": 3}
    run = RunState(
        "r1",
        "g",
        ["ingest", "meshing"],
        tops,
        status=status,
        layers=build_layers(["ingest", "meshing"], tops),
    )
    for key, phase in (phases or {}).items():
        run.layers[key].phase = phase
    return run


def test_layer_of_lists_the_layers_the_run_has():
    run = make_run()
    assert ops.layer_of(run, "ingest", 3) is run.layers["ingest-L3"]
    with pytest.raises(
        ops.ActionError, match=r"no layer meshing L4 \(it has: ingest L2-L4, meshing L2-L3\)"
    ):
        ops.layer_of(run, "meshing", 4)


@pytest.mark.parametrize(
    ("layers", "phases", "want"),
    [
        (None, {}, ["ingest-L2", "ingest-L3", "ingest-L4"]),
        (None, {"ingest-L2": "succeeded"}, ["ingest-L3", "ingest-L4"]),  # only waiting ones
        ([3], {}, ["ingest-L3"]),
        ([2, 4], {"ingest-L2": "running"}, ["ingest-L2", "ingest-L4"]),  # named: any phase
    ],
)
def test_approve(layers, phases, want):
    run = make_run(phases=phases)
    assert ops.approve(run, "ingest", layers, "ana", T0) == want
    approved = {k for k, ls in run.layers.items() if ls.approval.granted}
    assert approved == set(want)
    assert all(run.layers[k].approval.by == "ana" and run.layers[k].approval.at == T0 for k in want)


def test_approve_keeps_the_first_approver():
    run = make_run()
    ops.approve(run, "ingest", [2], "ana", T0)
    ops.approve(run, "ingest", [2], "bob", datetime(2026, 2, 1, tzinfo=UTC))
    assert (run.layers["ingest-L2"].approval.by, run.layers["ingest-L2"].approval.at) == ("ana", T0)


def test_approve_an_unknown_stage():
    with pytest.raises(ops.ActionError, match="no stage 'l2cache'"):
        ops.approve(make_run(), "l2cache", None, "ana", T0)


@pytest.mark.parametrize(
    ("action", "status", "after", "error"),
    [
        (ops.pause, "running", "paused", None),
        (ops.pause, "paused", "paused", "is paused, not running"),
        (ops.pause, "succeeded", "succeeded", "is succeeded, not running"),
        (ops.resume, "paused", "running", None),
        (ops.resume, "running", "running", "is running, not paused"),
    ],
)
def test_pause_and_resume(action, status, after, error):
    run = make_run(status)
    if error:
        with pytest.raises(ops.ActionError, match=error):
            action(run)
    else:
        action(run)
    assert run.status == after


@pytest.mark.parametrize(("parallelism", "error"), [(5, None), (None, None), (0, ">= 1")])
def test_scale(parallelism, error):
    run = make_run()
    run.layers["ingest-L2"].job.scale_override = 3
    if error:
        with pytest.raises(ops.ActionError, match=error):
            ops.scale(run, "ingest", 2, parallelism)
        assert run.layers["ingest-L2"].job.scale_override == 3
    else:
        ops.scale(run, "ingest", 2, parallelism)
        assert run.layers["ingest-L2"].job.scale_override == parallelism


@pytest.mark.parametrize(
    ("phase", "after", "reason", "error"),
    [
        ("running", "failed", "deleted by ana", None),
        ("failed", "failed", "FailedIndexes", None),  # its Job is removed, the reason kept
        ("waiting", "waiting", "", "only a running or failed layer has a Job"),
        ("succeeded", "succeeded", "", "only a running or failed layer has a Job"),
    ],
)
def test_cancel(phase, after, reason, error):
    run = make_run(phases={"ingest-L2": phase})
    ls = run.layers["ingest-L2"]
    ls.failure_reason = "FailedIndexes" if phase == "failed" else ""
    if error:
        with pytest.raises(ops.ActionError, match=error):
            ops.cancel(run, "ingest", 2, "ana", T0)
        assert not ls.job.delete_requested
    else:
        ops.cancel(run, "ingest", 2, "ana", T0)
        assert ls.job.delete_requested
    assert (ls.phase, ls.failure_reason) == (after, reason)


@pytest.mark.parametrize(
    ("status", "after"), [("failed", "running"), ("running", "running"), ("paused", "paused")]
)
def test_resubmit_starts_a_fresh_approved_attempt(status, after):
    run = make_run(status, phases={"ingest-L2": "failed"})
    old = run.layers["ingest-L2"]
    old.job.attempt, old.job.name, old.progress.failed_indexes = 1, "job-old", "3"
    ops.resubmit(run, "ingest", 2, "ana", T0)
    new = run.layers["ingest-L2"]
    assert (new.phase, new.job.attempt, new.job.name, new.progress.failed_indexes) == (
        "waiting",
        2,
        "",
        "",
    )
    assert (new.approval.granted, new.approval.by, new.approval.at) == (True, "ana", T0)
    assert run.status == after


@pytest.mark.parametrize(
    ("record", "field", "before", "running", "after"),
    [
        ("pods", "cpu_seconds", 100.0, 20.0, 120.0),
        ("pods", "memory_gib_seconds", 400.0, 80.0, 480.0),
        ("pods", "succeeded", 7, None, 7),
        ("pods", "failed", 3, None, 3),
        ("pods", "preempted", 2, None, 2),
        ("faults", "hung", 4, None, 4),  # status and the chaos summary count every attempt's
        ("pods", "succeeded_runtime_s", 55.0, None, 55.0),
    ],
)
def test_resubmit_keeps_the_earlier_attempts_cost(record, field, before, running, after):
    """The budget guard counts every attempt: a re-submit keeps the layer's cost so far,
    closing the usage the old attempt's open pods had accrued."""
    run = make_run(phases={"ingest-L2": "failed"})
    old = run.layers["ingest-L2"]
    setattr(getattr(old, record), field, before)
    if running is not None:
        setattr(old.pods, f"running_{field}", running)
    ops.resubmit(run, "ingest", 2, "ana", T0)
    new = run.layers["ingest-L2"]
    assert getattr(getattr(new, record), field) == after
    assert new.pods.running_cpu_seconds == 0.0 and new.pods.open == []


@pytest.mark.parametrize("phase", ["waiting", "running", "succeeded"])
def test_only_a_failed_layer_is_resubmitted(phase):
    run = make_run(phases={"ingest-L2": phase})
    with pytest.raises(ops.ActionError, match="only a failed layer"):
        ops.resubmit(run, "ingest", 2, "ana", T0)
    assert run.layers["ingest-L2"].job.attempt == 0
