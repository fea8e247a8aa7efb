"""Fast advances without Job events: the tick's short watch over layers about to finish.

On GKE a Job of more than 25 pods has usually spent its event bucket on `SuccessfulCreate`
by the time it completes, so its `Completed` event is dropped and the layer would advance
only at the next tick (up to a minute later). This works for every workload, PyChunkedGraph
images included, because it needs nothing from the pods: after its reconciles, the tick
function keeps watching the Jobs of layers that may finish before the tick after next (in
their tail: every remaining index already has a pod; or, at the rate of progress seen since
the Job was submitted, done within `horizon_s`) with one Job GET every `poll_s`, until
`budget_s` after the tick was published (ending before the next tick), and reconciles a run
as soon as one of its watched Jobs has finished. For the last `handoff_s` before the next
tick (after the budget, whose margin is room for a reconcile begun at its end) it keeps
polling, and hands a run whose Job finished to the kick function instead (`hand_off`: a
kick message), so a layer that finishes then does not wait for the next tick, and the tick
still ends before the next one. Kubernetes API GETs are free; Firestore is read once per
tick for the watch list and again only when a Job has finished. Logic only: the I/O is
injected.

Ticks must never watch into each other (docs/ticks-and-evictions.md): a tick queued behind
another, or redelivered after a failure, would otherwise run a second full watch into the
next one, and the drift ends in refused deliveries and dead-lettered ticks. So the budget
counts from the tick's publish time (the Pub/Sub message's `publishTime`, the only clock that
says how late a tick is), a tick older than the tick period reconciles but does not watch
(`watch_window`), and a watch holds a lease (`watch_lease_expiry`) that a second tick finds
taken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.model import intervals
from shared.model.phase import Phase, RunStatus
from shared.model.state import LayerState, RunState
from shared.ports.cluster import JobStatus

# The tick must be over before Cloud Scheduler's next one (a function with max_instances 1
# refuses overlapping deliveries), with room for the tick's own reconciles.
TICK_MARGIN_S = 10.0
MAX_BUDGET_S = 50.0
# After the budget the watch only polls and hands finished runs to the kick function, until
# this long before the next tick: room for the last poll's GET and the function's return.
HANDOFF_END_MARGIN_S = 3.0


@dataclass(frozen=True)
class WatchPolicy:
    """`poll_s` between Job GETs; `budget_s` from the tick's start to the end of the watch's
    reconciles (0: no watch); `horizon_s`: how soon a layer must be able to finish to be
    watched; `handoff_s`: how long after the budget the watch keeps polling and hands a run
    whose Job finished to the kick function (0: it stops at the budget)."""

    poll_s: float = 1.0  # Kubernetes API GETs are free; a second is the Job status pace
    budget_s: float = MAX_BUDGET_S
    horizon_s: float = 120.0
    handoff_s: float = 0.0

    def __post_init__(self) -> None:
        if self.poll_s <= 0 or self.budget_s < 0 or self.handoff_s < 0:
            raise ValueError(
                f"watch policy needs poll_s > 0, budget_s >= 0 and handoff_s >= 0, got "
                f"{self.poll_s}, {self.budget_s}, {self.handoff_s} (PIPELINE_WATCH_POLL_S / "
                "PIPELINE_WATCH_BUDGET_S)"
            )

    @property
    def end_s(self) -> float:
        """From the tick's start to the watch's end, hand-offs included."""
        return self.budget_s + self.handoff_s if self.budget_s > 0 else 0.0

    @classmethod
    def for_tick_period(cls, tick_period_s: float, poll_s: float = 1.0) -> WatchPolicy:
        """Reconcile until `TICK_MARGIN_S` before the next tick, at most `MAX_BUDGET_S`, then
        hand off until `HANDOFF_END_MARGIN_S` before it. A tick period under three margins
        (the local stack's seconds; Cloud Scheduler's is a minute) keeps a third of itself
        (at least two polls) as the margin, half of that for the hand-offs' end, so its
        layers are watched too: at 5 s ticks a layer whose Job events were dropped would
        otherwise wait 2.5 s on average for the next tick. A period that leaves no room for
        two polls needs no watch (the ticks are fast enough)."""
        margin = min(TICK_MARGIN_S, max(2 * poll_s, tick_period_s / 3))
        budget = min(MAX_BUDGET_S, tick_period_s - margin)
        if budget < 2 * poll_s:
            return cls(poll_s, 0.0, 2 * tick_period_s)
        handoff = margin - min(HANDOFF_END_MARGIN_S, margin / 2)
        return cls(poll_s, budget, 2 * tick_period_s, handoff if handoff >= poll_s else 0.0)


@dataclass(frozen=True)
class WatchWindow:
    """What a tick may watch: `seconds` left of its budget (0: no watch) and why: `watch`,
    `late` (published more than a tick period ago), `spent` (its budget has run out: a
    redelivery, or a tick that queued) or `off` (no watch configured)."""

    seconds: float
    reason: str

    @property
    def watches(self) -> bool:
        return self.seconds > 0


def watch_window(
    published_at: datetime, now: datetime, tick_period_s: float, policy: WatchPolicy
) -> WatchWindow:
    """How long a tick published at `published_at` may watch at `now`: its budget less its
    age, if at least one poll fits. A publish time ahead of `now` (clock skew) counts as age 0."""
    if policy.budget_s <= 0:
        return WatchWindow(0.0, "off")
    age = max(0.0, (now - published_at).total_seconds())
    if age > tick_period_s:
        return WatchWindow(0.0, "late")
    left = policy.budget_s - age
    if left < policy.poll_s:
        return WatchWindow(0.0, "spent")
    return WatchWindow(left, "watch")


def watch_lease_expiry(
    published_at: datetime, tick_period_s: float, policy: WatchPolicy
) -> datetime:
    """When a watch's lease lapses if its holder never releases it (its function died): a
    tick period after the watch's own end (hand-offs included), so the next tick's watch,
    which could overlap a holder still running, is lost rather than run twice."""
    return published_at + timedelta(seconds=policy.end_s + tick_period_s)


def may_finish_soon(ls: LayerState, now: datetime, horizon_s: float) -> bool:
    """A running layer that may finish within `horizon_s`: in its tail (no remaining index
    without a pod), or done by then at the rate of progress since its Job was submitted."""
    if ls.phase != Phase.RUNNING or not ls.job.name:
        return False
    done = intervals.count(ls.progress.completed_indexes) + intervals.count(
        ls.progress.failed_indexes
    )
    remaining = ls.job.completions - done
    if remaining <= max(ls.job.parallelism, 1):
        return True
    if done <= 0 or ls.timing.submitted_at is None:
        return False
    elapsed = (now - ls.timing.submitted_at).total_seconds()
    return elapsed > 0 and remaining * elapsed / done <= horizon_s


def jobs_to_watch(runs: list[RunState], now: datetime, horizon_s: float) -> dict[str, list[str]]:
    """Run id -> Job names of its layers that may finish soon (running runs only)."""
    out: dict[str, list[str]] = {}
    for run in runs:
        if run.status != RunStatus.RUNNING:
            continue
        names = [ls.job.name for ls in run.layers.values() if may_finish_soon(ls, now, horizon_s)]
        if names:
            out[run.run_id] = names
    return out


def job_finished(status: JobStatus | None) -> bool:
    """Time to reconcile: the Job is Complete or Failed (or gone: someone deleted it)."""
    return status is None or status.condition in ("Complete", "Failed")


def watch(
    runs: list[RunState],
    get_job: Callable[[str], JobStatus | None],
    reconcile: Callable[[str], RunState | None],
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
    clock: Callable[[], datetime],
    policy: WatchPolicy,
    started: float | None = None,
    hand_off: Callable[[str], None] | None = None,
) -> list[str]:
    """Poll the tail layers' Jobs until the watch's end or nothing is left to watch;
    reconcile a run when one of its watched Jobs has finished (`reconcile` returns the run's
    fresh state, or None once it needs no more watching). Returns the run ids reconciled or
    handed off, in order. `reconcile` handles (logs) its own errors and returns None after
    one: the next tick retries that run. The budget runs from `started` (the tick's publish
    time on the `monotonic` clock; now if None), so a late tick watches less, never into the
    next one. After the budget, for `policy.handoff_s`, a finished run goes to `hand_off`
    (which handles its own errors) rather than to a reconcile here; without `hand_off` the
    watch ends with the budget."""
    start = monotonic() if started is None else started
    deadline = start + policy.budget_s
    end = start + (policy.end_s if hand_off is not None else policy.budget_s)
    targets = jobs_to_watch(runs, clock(), policy.horizon_s)
    reconciled: list[str] = []
    while targets and monotonic() + policy.poll_s <= end:
        sleep(policy.poll_s)
        for run_id in list(targets):
            if not any(job_finished(get_job(name)) for name in targets[run_id]):
                continue
            reconciled.append(run_id)
            targets.pop(run_id)
            if monotonic() > deadline and hand_off is not None:
                hand_off(run_id)  # too near the next tick for a reconcile here
                continue
            fresh = reconcile(run_id)
            if fresh is not None:
                targets.update(jobs_to_watch([fresh], clock(), policy.horizon_s))
    return reconciled
