"""The tick's watch over layers about to finish (table-driven; clock and Jobs scripted)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.control.advance_watch import (
    WatchPolicy,
    jobs_to_watch,
    may_finish_soon,
    watch,
    watch_lease_expiry,
    watch_window,
)
from shared.model.state import JobAttempt, LayerState, Progress, RunState, Timing
from shared.ports.cluster import JobStatus

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def layer(
    layer_no: int = 2,
    phase: str = "running",
    completions: int = 100,
    parallelism: int = 10,
    completed: str = "",
    failed: str = "",
    submitted_s_ago: float | None = 60.0,
) -> LayerState:
    return LayerState(
        stage="ingest",
        layer=layer_no,
        phase=phase,
        job=JobAttempt(
            name=f"job-l{layer_no}" if phase != "waiting" else "",
            completions=completions,
            parallelism=parallelism,
        ),
        progress=Progress(completed_indexes=completed, failed_indexes=failed),
        timing=Timing(
            submitted_at=None
            if submitted_s_ago is None
            else NOW - timedelta(seconds=submitted_s_ago)
        ),
    )


@pytest.mark.parametrize(
    ("ls", "soon"),
    [
        (layer(completed="0-89"), True),  # 10 left, parallelism 10: all have a pod
        (layer(completed="0-88"), True),  # 11 left; 89 done in 60 s: 11 more take ~7 s...
        (layer(completed="0-88", submitted_s_ago=10_000), False),  # ...but not at this rate
        (layer(completed="0-9"), False),  # 90 left at 10 per minute: 9 min > horizon 2 min
        (layer(completed="0-79", failed="80-89"), True),  # failed indexes are done too
        (layer(completed=""), False),  # no progress yet: no rate
        (layer(completed="0-49", submitted_s_ago=None), False),  # never submitted
        (layer(phase="succeeded", completed="0-99"), False),
        (layer(phase="waiting"), False),
        (layer(completions=3, parallelism=0), False),  # paused layer: 3 left > max(0, 1)
        (layer(completions=1, parallelism=0), True),
    ],
)
def test_may_finish_soon(ls: LayerState, soon: bool) -> None:
    assert may_finish_soon(ls, NOW, horizon_s=120.0) is soon


def test_may_finish_soon_table_is_checked_against_the_rate() -> None:
    # 0-9 done in 60 s: 90 left need 540 s; a horizon of 600 s includes it, 120 s does not
    ls = layer(completed="0-9")
    assert may_finish_soon(ls, NOW, 600.0) and not may_finish_soon(ls, NOW, 120.0)


def run_state(run_id: str, status: str = "running", *layers: LayerState) -> RunState:
    return RunState(
        run_id=run_id,
        graph_id="g",
        stages=["ingest"],
        top_layers={"ingest": 4},
        status=status,
        layers={f"ingest-L{ls.layer}": ls for ls in layers},
    )


def test_jobs_to_watch_skips_paused_runs_and_far_layers() -> None:
    runs = [
        run_state("a", "running", layer(2, completed="0-95"), layer(3, phase="waiting")),
        run_state("b", "paused", layer(2, completed="0-95")),
        run_state("c", "running", layer(2, completed="")),
    ]
    assert jobs_to_watch(runs, NOW, 120.0) == {"a": ["job-l2"]}


def job(name: str, condition: str | None = None) -> JobStatus:
    return JobStatus(name, {}, {}, 100, 10, False, condition=condition)


class Script:
    """A clock that sleep advances, and Jobs that finish at given times."""

    def __init__(self, finishes: dict[str, float]) -> None:
        self.t = 0.0
        self.finishes = finishes
        self.gets = 0

    def sleep(self, s: float) -> None:
        self.t += s

    def get_job(self, name: str) -> JobStatus | None:
        self.gets += 1
        at = self.finishes.get(name)
        return job(name, "Complete" if at is not None and self.t >= at else None)


@pytest.mark.parametrize(
    ("finishes", "budget", "reconciled", "final_t"),
    [
        ({"job-l2": 12.0}, 45.0, ["a"], 15.0),  # seen at the 3rd poll, then nothing to watch
        ({"job-l2": 100.0}, 45.0, [], 45.0),  # not done within the budget: the tick does it
        ({"job-l2": 0.0}, 0.0, [], 0.0),  # budget 0: no watch at all
        ({"job-l2": 4.0}, 4.0, [], 0.0),  # a budget shorter than a poll: no poll
    ],
)
def test_watch_polls_until_a_job_finishes_or_the_budget_is_spent(
    finishes: dict[str, float], budget: float, reconciled: list[str], final_t: float
) -> None:
    script = Script(finishes)
    runs = [run_state("a", "running", layer(2, completed="0-95"))]
    out = watch(
        runs,
        script.get_job,
        lambda run_id: None,
        script.sleep,
        lambda: script.t,
        lambda: NOW,
        WatchPolicy(poll_s=5.0, budget_s=budget),
    )
    assert out == reconciled
    assert script.t == final_t


def test_watch_follows_the_next_layer_the_reconcile_started() -> None:
    script = Script({"job-l2": 5.0, "job-l3": 20.0})
    states = iter(
        [
            run_state(
                "a", "running", layer(2, phase="succeeded"), layer(3, completions=8, parallelism=8)
            ),
            run_state("a", "succeeded", layer(3, phase="succeeded")),
        ]
    )
    out = watch(
        [run_state("a", "running", layer(2, completed="0-95"))],
        script.get_job,
        lambda run_id: next(states),
        script.sleep,
        lambda: script.t,
        lambda: NOW,
        WatchPolicy(poll_s=5.0, budget_s=45.0),
    )
    assert out == ["a", "a"] and script.t == 20.0


def test_a_deleted_job_counts_as_finished() -> None:
    runs = [run_state("a", "running", layer(2, completed="0-95"))]
    out = watch(
        runs,
        lambda n: None,
        lambda r: None,
        lambda s: None,
        iter(range(100)).__next__,
        lambda: NOW,
        WatchPolicy(1.0, 10.0),
    )
    assert out == ["a"]


@pytest.mark.parametrize(
    ("tick_s", "budget", "handoff", "horizon"),
    [
        (60.0, 50.0, 7.0, 120.0),  # reconciles until 50 s, hands off until 57 s
        (120.0, 50.0, 7.0, 240.0),
        (30.0, 20.0, 7.0, 60.0),
        # under three margins a third of the tick is the margin, half of it the hand-offs'
        (15.0, 10.0, 2.5, 30.0),
        (6.0, 4.0, 1.0, 12.0),
        (5.0, 3.0, 1.0, 10.0),  # the demo's ticks: watched from 0 to 4 s of each 5
        (4.0, 2.0, 1.0, 8.0),  # the margin is two polls at least
        (3.0, 0.0, 0.0, 6.0),  # 1 s of budget: not two polls, the ticks are fast enough
        (2.0, 0.0, 0.0, 4.0),
    ],
)
def test_policy_for_tick_period_ends_before_the_next_tick(
    tick_s: float, budget: float, handoff: float, horizon: float
) -> None:
    policy = WatchPolicy.for_tick_period(tick_s)
    assert (policy.budget_s, policy.handoff_s, policy.horizon_s) == pytest.approx(
        (budget, handoff, horizon)
    )
    assert policy.end_s <= tick_s - min(3.0, tick_s / 6) or policy.end_s == 0.0


def test_a_policy_with_hand_offs_but_no_budget_does_not_watch() -> None:
    assert WatchPolicy(1.0, 0.0, handoff_s=7.0).end_s == 0.0


# Hand-offs after the budget (polls of 1 s, budget 10 s, hand-offs for 5 s more): when the
# watched Job finishes -> (reconciled here, handed off, the watch's last clock reading)
HANDOFFS = {
    "within the budget": (4.0, ["a"], [], 4.0),
    "at the budget's last poll": (10.0, ["a"], [], 10.0),
    "after the budget": (12.0, [], ["a"], 12.0),
    "at the hand-offs' last poll": (15.0, [], ["a"], 15.0),
    "after the hand-offs": (16.0, [], [], 15.0),
}


@pytest.mark.parametrize(
    ("finish", "reconciled", "handed", "final_t"), HANDOFFS.values(), ids=HANDOFFS.keys()
)
def test_after_the_budget_a_finished_run_is_handed_off_not_reconciled(
    finish: float, reconciled: list[str], handed: list[str], final_t: float
) -> None:
    script = Script({"job-l2": finish})
    done: list[str] = []
    kicked: list[str] = []

    def reconcile(run_id: str) -> None:
        done.append(run_id)

    out = watch(
        [run_state("a", "running", layer(2, completed="0-95"))],
        script.get_job,
        reconcile,
        script.sleep,
        lambda: script.t,
        lambda: NOW,
        WatchPolicy(poll_s=1.0, budget_s=10.0, handoff_s=5.0),
        started=0.0,
        hand_off=kicked.append,
    )
    assert (done, kicked, script.t) == (reconciled, handed, final_t)
    assert out == reconciled + handed


def _watch_one_layer(script: Script, policy: WatchPolicy) -> list[str]:
    """Watch run "a" (layer 2 in its tail) from a tick that started at 0, reconciling to
    nothing."""
    return watch(
        [run_state("a", "running", layer(2, completed="0-95"))],
        script.get_job,
        lambda run_id: None,
        script.sleep,
        lambda: script.t,
        lambda: NOW,
        policy,
        started=0.0,
    )


def test_without_a_hand_off_the_watch_ends_with_its_budget() -> None:
    script = Script({"job-l2": 12.0})
    out = _watch_one_layer(script, WatchPolicy(poll_s=1.0, budget_s=10.0, handoff_s=5.0))
    assert (out, script.t) == ([], 10.0)


def test_bad_policy_names_the_settings() -> None:
    with pytest.raises(ValueError, match="PIPELINE_WATCH_BUDGET_S"):
        WatchPolicy(poll_s=5.0, budget_s=-1.0)


def test_the_budget_counts_from_the_ticks_start() -> None:
    script = Script({"job-l2": 100.0})
    script.t = 30.0  # the tick's reconciles took 30 s
    _watch_one_layer(script, WatchPolicy(poll_s=5.0, budget_s=45.0))
    assert script.t == 45.0


# The tick's watch window from its publish time (period 60 s, budget 50 s, polls of 1 s):
# age of the tick when its watch would begin -> (seconds it may watch, why)
WINDOWS = {
    "on time": (0.0, 50.0, "watch"),
    "its reconciles took 8 s": (8.0, 42.0, "watch"),
    "queued 30 s": (30.0, 20.0, "watch"),
    "one poll left": (49.0, 1.0, "watch"),
    "less than a poll left": (49.5, 0.0, "spent"),
    "redelivered after its watch": (52.0, 0.0, "spent"),
    "exactly a period old": (60.0, 0.0, "spent"),
    "older than the period": (61.0, 0.0, "late"),
    "redelivered minutes later": (600.0, 0.0, "late"),
    "published ahead of our clock": (-2.0, 50.0, "watch"),
}


@pytest.mark.parametrize(("age", "seconds", "reason"), WINDOWS.values(), ids=WINDOWS.keys())
def test_the_watch_budget_counts_from_the_ticks_publish_time(age, seconds, reason) -> None:
    policy = WatchPolicy.for_tick_period(60.0)
    window = watch_window(NOW - timedelta(seconds=age), NOW, 60.0, policy)
    assert (window.seconds, window.reason) == (pytest.approx(seconds), reason)
    assert window.watches is (reason == "watch")


def test_no_watch_configured_is_off_whatever_the_age() -> None:
    policy = WatchPolicy(3.0, 0.0)
    assert watch_window(NOW, NOW, 60.0, policy).reason == "off"


def test_a_dead_holders_lease_lapses_a_period_after_its_watch_would_have_ended() -> None:
    policy = WatchPolicy.for_tick_period(60.0)
    expiry = watch_lease_expiry(NOW, 60.0, policy)
    # the watch ends at 57 s (50 reconciling, 7 handing off); the next tick (NOW + 60)
    # cannot watch
    assert expiry == NOW + timedelta(seconds=117)
    assert expiry < NOW + timedelta(seconds=120)  # the one after it can
