"""The chaos plan: N faults spread over a run's expected duration and over fault kinds.

`pipeline demo --chaos N` injects the faults this plans (the local injector,
`adapters.local.chaos`, does the I/O). The plan is a pure function of N, the seed, the
expected wall time and the kinds asked for: the same arguments give the same faults, in the
same order, at the same offsets.

Kinds share N by weight: cheap kinds (a pod killed, a message duplicated) weigh more than
costly ones (the cluster API down for 30 s, a worker cut off from Bigtable until its claim
expires, a fatal chunk that needs an operator); every kind comes once first (in an order
shuffled by the seed) when N allows, the rest interleaved by smooth weighted round-robin.
Offsets are spread evenly over the window [START, END] of the expected duration, each
jittered within its slot by the seed.

The injector arms a fault when `is_due` says so: its offset has passed *and* the run is as
far along as the baseline was then (so a run slowed by earlier faults is not hit faster than
it moves; progress counts the chunks begun), one worker fault waits for a worker at a
time, and the API server is up at least as long as it was down between two outages.
Pure module.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

# What a fault does (docs/chaos.md has the full table).
POD_SIGKILL = "pod_sigkill"  # a pod SIGKILLed mid-chunk (exit 137: the index is retried)
POD_PREEMPTED = "pod_preempted"  # SIGTERM with DisruptionTarget, as a Spot reclaim
NODE_LOST = "node_lost"  # the pod's node lost: pod deleted, its logs gone
BIGTABLE_CUT_OFF = "bigtable_cut_off"  # lock renewals fail until the claim nears expiry
CHUNK_TRANSIENT = "chunk_transient"  # the chunk raises a transient error (exit 1)
CHUNK_FATAL = "chunk_fatal"  # the chunk raises FatalChunkError; the operator re-submits
PUBSUB_DUPLICATE = "pubsub_duplicate"  # a message delivered twice
PUBSUB_DELAY = "pubsub_delay"  # a message delivered seconds late
PUBSUB_REORDER = "pubsub_reorder"  # a message held back behind the next one
PUBSUB_DROP = "pubsub_drop"  # a message acknowledged and never delivered
HOST_KILLED = "host_killed"  # the function dies between its commit and its act
CLUSTER_API_DOWN = "cluster_api_down"  # every cluster call refused for CLUSTER_DOWN_S
POD_HUNG = "pod_hung"  # alive, renewing its claim, no progress: replaced as hung

#: Kind -> weight in the round-robin (cheap kinds weigh more).
WEIGHTS: dict[str, int] = {
    POD_SIGKILL: 3,
    POD_PREEMPTED: 3,
    NODE_LOST: 2,
    BIGTABLE_CUT_OFF: 1,
    CHUNK_TRANSIENT: 3,
    CHUNK_FATAL: 1,
    PUBSUB_DUPLICATE: 3,
    PUBSUB_DELAY: 3,
    PUBSUB_REORDER: 3,
    PUBSUB_DROP: 3,
    HOST_KILLED: 2,
    CLUSTER_API_DOWN: 1,
    POD_HUNG: 1,
}
KINDS: tuple[str, ...] = tuple(WEIGHTS)
#: Kinds that cost seconds of wall time each (a hung pod: the controller's hung floor), or an
#: operator's action.
COSTLY: frozenset[str] = frozenset({BIGTABLE_CUT_OFF, CHUNK_FATAL, CLUSTER_API_DOWN, POD_HUNG})
CHEAP: tuple[str, ...] = tuple(k for k in KINDS if k not in COSTLY)
#: Kinds a worker takes at its next chunk (the rest act on messages, functions, the API).
WORKER_KINDS: frozenset[str] = frozenset(
    {
        POD_SIGKILL,
        POD_PREEMPTED,
        NODE_LOST,
        BIGTABLE_CUT_OFF,
        CHUNK_TRANSIENT,
        CHUNK_FATAL,
        POD_HUNG,
    }
)
CLUSTER_DOWN_S = 30.0
#: From one API outage's start to the next one's: up at least as long as it was down.
OUTAGE_GAP_S = 2 * CLUSTER_DOWN_S
START, END = 0.05, 0.7  # the share of the expected duration the faults are spread over


class ChaosPlanError(ValueError):
    """The chaos arguments cannot make a plan; the message names the argument."""


@dataclass(frozen=True)
class Fault:
    """One planned fault: the `seq`-th, of `kind`, due `at_s` seconds into the run."""

    seq: int
    kind: str
    at_s: float

    @property
    def fault_id(self) -> str:
        """A name unique in the plan that sorts by seq (files and logs carry it)."""
        return f"{self.seq:05d}-{self.kind}"


@dataclass(frozen=True)
class Pace:
    """What the injector knows of the run when it asks whether a fault is due."""

    elapsed_s: float  # since the injector started
    progress: float  # share of the build's chunks begun, 0..1 (1.0: not watched)
    worker_fault_waiting: bool  # a worker fault is armed and no worker has taken it yet
    since_outage_s: float | None = None  # since the last API outage began; None: none yet


def is_due(fault: Fault, expected_wall_s: float, pace: Pace) -> bool:
    """Whether `fault` is armed now (see the module docstring): its offset has passed and
    the run's progress has reached the share of the baseline the offset stands for; a worker
    fault waits while another waits for a worker; an outage keeps OUTAGE_GAP_S from the last."""
    if pace.elapsed_s < fault.at_s or pace.progress < fault.at_s / expected_wall_s:
        return False
    if fault.kind in WORKER_KINDS:
        return not pace.worker_fault_waiting
    if fault.kind == CLUSTER_API_DOWN:
        return pace.since_outage_s is None or pace.since_outage_s >= OUTAGE_GAP_S
    return True


def build_progress(begun: dict[str, int], totals: dict[str, int]) -> float:
    """The share of the build's chunks begun: `begun` and `totals` by layer key (a count
    above its total counts as the total; no total: 0)."""
    whole = sum(totals.values())
    if whole <= 0:
        return 0.0
    return sum(min(begun.get(k, 0), n) for k, n in totals.items()) / whole


def parse_kinds(text: str | None) -> tuple[str, ...]:
    """`--chaos-kinds`: a comma list of kinds, `cheap`, or empty/None/`all` for every kind."""
    if not text or text.strip() == "all":
        return KINDS
    if text.strip() == "cheap":
        return CHEAP
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in WEIGHTS]
    if unknown or not kinds:
        raise ChaosPlanError(
            f"--chaos-kinds: unknown kind(s) {unknown or [text]}; choose from "
            f"{', '.join(WEIGHTS)}, or 'cheap' / 'all'"
        )
    return kinds


def apportion(n: int, order: list[str]) -> dict[str, int]:
    """`n` shared out by weight (largest remainders, ties in `order`), every kind at least
    once when `n` allows."""
    if n < len(order):
        return {k: int(k in order[:n]) for k in order}
    total = sum(WEIGHTS[k] for k in order)
    counts = {k: max(1, n * WEIGHTS[k] // total) for k in order}
    while sum(counts.values()) > n:  # the minimum of one pushed us over: take from the largest
        counts[max(order, key=lambda k: counts[k])] -= 1
    # Kinds raised to their minimum of one have had more than their share already.
    by_remainder = sorted(order, key=lambda k: (n * WEIGHTS[k] < total, -(n * WEIGHTS[k] % total)))
    for k in by_remainder[: n - sum(counts.values())]:
        counts[k] += 1
    return counts


def deal_kinds(n: int, kinds: tuple[str, ...], seed: int) -> list[str]:
    """`n` kinds in their weights' shares (`apportion`): first each kind once, in an order
    shuffled by `seed`, then the rest interleaved by smooth weighted round-robin."""
    order = list(kinds)
    random.Random(seed).shuffle(order)
    # The shares are the weights' whatever the seed (ties broken in the kinds' own order);
    # the seed picks which kinds go without when there are fewer faults than kinds.
    counts = apportion(n, order if n < len(kinds) else list(kinds))
    first = [k for k in order if counts[k]]
    rest = {k: counts[k] - 1 for k in first if counts[k] > 1}
    current = dict.fromkeys(rest, 0)
    total = sum(rest.values())
    dealt: list[str] = []
    for _ in range(total):
        for k in rest:
            current[k] += rest[k]
        best = max(rest, key=lambda k: current[k])  # the first maximum, in shuffled order
        current[best] -= total
        dealt.append(best)
    return first + dealt


def plan_faults(
    n: int, seed: int, expected_wall_s: float, kinds: tuple[str, ...] = KINDS
) -> list[Fault]:
    """`n` faults of `kinds` spread over [START, END] of `expected_wall_s`, sorted by time."""
    if n < 0:
        raise ChaosPlanError(f"--chaos must be >= 0, got {n}")
    if expected_wall_s <= 0:
        raise ChaosPlanError(f"the expected wall time must be > 0 s, got {expected_wall_s}")
    if not kinds:
        raise ChaosPlanError("--chaos-kinds: no kind chosen")
    dealt = deal_kinds(n, kinds, seed)
    rng = random.Random(seed * 7919 + 1)
    span = (END - START) * expected_wall_s
    slot = span / max(n, 1)
    faults = [
        Fault(i, kind, round(START * expected_wall_s + slot * (i + rng.random()), 3))
        for i, kind in enumerate(dealt)
    ]
    return sorted(faults, key=lambda f: (f.at_s, f.seq))


def planned_by_kind(faults: list[Fault]) -> dict[str, int]:
    """How many faults of each kind the plan holds."""
    return dict(Counter(f.kind for f in faults))
