"""A running layer's parallelism target: what its ramp (or the operator's `scale`) allows now.

Pure module. The controller patches Jobs to it; `pipeline status` shows it and the run
report sums it over time, so all three read the same number.
"""

from __future__ import annotations

import math
from datetime import datetime

from shared.config.config import Ramp


def ramp_target(ramp: Ramp, completions: int, started: datetime | None, now: datetime) -> int:
    """Parallelism the ramp allows at `now`: start * factor**steps, capped; at least 1."""
    cap = max(1, min(ramp.max, completions))
    if started is None:
        return min(ramp.start, cap)
    steps = max(0, math.floor((now - started).total_seconds() / ramp.period))
    if ramp.factor <= 1 or ramp.start >= cap:
        return min(ramp.start, cap)
    # Past the step that reaches the cap the value is the cap: bounding the exponent there
    # keeps a multi-day run from overflowing a float without freezing a slow ramp short of it.
    to_cap = math.ceil(math.log(cap / ramp.start) / math.log(ramp.factor)) + 1  # +1: float slack
    value = ramp.start * ramp.factor ** min(steps, to_cap)
    return int(min(max(ramp.start, value), cap))


def parallelism_target(
    ramp: Ramp,
    completions: int,
    started: datetime | None,
    now: datetime,
    *,
    override: int | None = None,
    current: int = 0,
) -> int:
    """The parallelism a running layer should have at `now` (before the vCPU cap): the
    operator's `override` (`pipeline scale`) or the ramp's target, between 1 and the Job's
    `completions`. Without an override it never drops below the `current` parallelism
    (the ramp never lowers) unless a lowered `ramp.max` (`pipeline apply`) asks for it."""
    target = override or ramp_target(ramp, completions, started, now)
    target = max(1, min(target, completions))
    if override is None:
        target = max(target, min(current, completions, ramp.max))
    return target
