"""Whether the ramp may grow while the graph's Bigtable instance is busy. Pure module.

Each reconcile reads the instance's CPU load (Cloud Monitoring's
`bigtable.googleapis.com/cluster/cpu_load`, the busiest cluster; on the local stack a load
derived from the emulator's request rate) and compares it with `controller.bigtable_cpu_max`:

| load                        | verdict | what the running layers do                        |
|-----------------------------|---------|---------------------------------------------------|
| unknown, or at most the max | ramp    | the ramp as configured                            |
| above the max               | hold    | no increase: parallelism stays where it is        |
| above the max + 0.15        | lower   | parallelism one ramp step lower (÷ factor, >= 1)  |

A held or lowered layer's ramp is re-anchored at its parallelism, so once the load falls it
grows again one step per period from there (not in one jump to where the clock says). An
operator's `pipeline scale` pin is left alone. See docs/bigtable-ramp-and-bill.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from shared.config.config import Ramp

LOWER_MARGIN = 0.15  # above max + this the ramp steps down, not only holds
DEFAULT_CPU_MAX = 0.7

Verdict = Literal["ramp", "hold", "lower"]


@dataclass(frozen=True)
class RampGate:
    """The verdict of one reconcile on the instance's load, and why (for `pipeline status`)."""

    verdict: Verdict = "ramp"
    reason: str = ""  # empty while the ramp runs freely
    load: float | None = None
    # How long a change of the load takes to show in it (the monitor's window and delay):
    # a step down is not followed by another before it can have shown.
    lag_s: float = 0.0


FREE = RampGate()  # no gate: the ramp as configured


def gate(load: float | None, cpu_max: float | None, lag_s: float = 0.0) -> RampGate:
    """The verdict for `load` (0..1, None: not known) against `cpu_max` (None: no gate);
    `lag_s`: how late the load shows a change (shared.ports.bigtable_monitor).

    An unknown load never holds the ramp: a Monitoring outage must not stall a build."""
    if load is None or cpu_max is None or load <= cpu_max:
        return RampGate("ramp", "", load, lag_s)
    pct = f"Bigtable CPU {load:.0%}"
    if load > cpu_max + LOWER_MARGIN:
        limit = f"controller.bigtable_cpu_max {cpu_max:.0%} + {LOWER_MARGIN:.0%}"
        return RampGate("lower", f"{pct} > {limit}: parallelism lowered one step", load, lag_s)
    held = f"{pct} > controller.bigtable_cpu_max {cpu_max:.0%}: ramp held"
    return RampGate("hold", held, load, lag_s)


def brief(reason: str) -> str:
    """A hold reason in a few words for a crowded screen: `ramp held, Bigtable CPU 82%`."""
    if not reason:
        return ""
    load, _, rest = reason.partition(" > ")
    return f"{rest.rpartition(': ')[2].replace(' one step', '')}, {load}"


def step_down(parallelism: int, factor: float) -> int:
    """One ramp step below `parallelism`: divided by the ramp's factor (at least one pod
    fewer), never below 1."""
    lowered = math.floor(parallelism / factor) if factor > 1 else parallelism - 1
    return max(1, min(lowered, parallelism - 1))


def reanchor(ramp: Ramp, parallelism: int, now: datetime) -> datetime:
    """A ramp start such that the ramp stands at or just below `parallelism` at `now`: its
    next step up comes one period later."""
    steps = 0
    if ramp.factor > 1:
        while ramp.start * ramp.factor ** (steps + 1) <= parallelism and steps < 64:
            steps += 1
    return now - timedelta(seconds=steps * ramp.period)


@dataclass(frozen=True)
class Throttled:
    """A running layer under the gate: its parallelism, and (None: unchanged) its
    re-anchored ramp start and when it last stepped down."""

    parallelism: int
    ramp_started_at: datetime | None = None
    lowered_at: datetime | None = None


def throttle(
    g: RampGate,
    target: int,
    parallelism: int,
    ramp: Ramp,
    now: datetime,
    lowered_at: datetime | None = None,
) -> Throttled:
    """What a running layer gets under the gate. `target` is what the ramp alone would give,
    `parallelism` what the layer has now, `lowered_at` when the gate last stepped it down:
    at most one step down per ramp period, and none before the last one can show in the
    load (`g.lag_s`: Bigtable's load is seen minutes late on Cloud Monitoring, over the
    meter's window locally), since a step each reconcile on a load that still shows the
    pods already taken away would overshoot to one pod; in between it holds."""
    if g.verdict == "ramp" or parallelism < 1:
        return Throttled(target)
    settle_s = max(ramp.period, g.lag_s)
    recent = lowered_at is not None and (now - lowered_at).total_seconds() < settle_s
    if g.verdict == "hold" or recent:
        held = min(target, parallelism)
        return Throttled(held, reanchor(ramp, held, now))
    lowered = min(target, step_down(parallelism, ramp.factor))
    return Throttled(lowered, reanchor(ramp, lowered, now), now)


@dataclass(frozen=True)
class Overload:
    """A simulated busy Bigtable: `load` from `start_s` to `end_s` after the build starts
    (`pipeline simulate --bigtable-overload START-END:LOAD`); unknown outside it."""

    start_s: float
    end_s: float
    load: float

    def at(self, elapsed_s: float) -> float | None:
        return self.load if self.start_s <= elapsed_s < self.end_s else None


def parse_overload(text: str) -> Overload:
    """`START-END:LOAD` (seconds after the start, load 0..1), e.g. `600-1800:0.8`; a
    ValueError names the form otherwise."""
    try:
        span, load = text.split(":")
        start, end = span.split("-")
        out = Overload(float(start), float(end), float(load))
    except ValueError:
        out = None
    if out is None or not 0 <= out.start_s < out.end_s or not 0 <= out.load <= 1:
        raise ValueError(
            f"--bigtable-overload {text!r}: give START-END:LOAD, seconds after the build's "
            "start and a load between 0 and 1, e.g. 600-1800:0.8"
        )
    return out
