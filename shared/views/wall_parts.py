"""Where a build's wall time goes (issue 27): named spans (approval wait, advance, pod
start-up, chunk compute, tail) laid over the run's wall interval, so that wall time is
exactly the sum of the named parts plus the remainder no span names. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Part(Enum):
    """A named part of wall time; earlier members win where spans overlap."""

    COMPUTE = "compute"
    TAIL = "tail"
    STARTUP = "startup"
    ADVANCE = "advance"
    APPROVAL_WAIT = "approval_wait"


UNNAMED = "unnamed"


@dataclass(frozen=True)
class Span:
    """One named interval of a layer, in seconds since the run started."""

    layer: str
    part: Part
    start: float
    end: float


def breakdown(spans: Iterable[Span], wall: float) -> dict[str, float]:
    """Seconds of [0, wall] per part (overlaps go to the earlier Part) and `unnamed` for
    the rest; the values sum to `wall`. Spans are clipped to the wall interval."""
    if wall < 0:
        raise ValueError(f"wall time must be >= 0, got {wall}")
    clipped = [(max(0.0, s.start), min(wall, s.end), s.part) for s in spans if s.end > s.start]
    cuts = sorted({0.0, wall, *(t for a, b, _ in clipped for t in (a, b) if 0.0 <= t <= wall)})
    order = list(Part)
    out = {p.value: 0.0 for p in Part} | {UNNAMED: 0.0}
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        covering = [p for a, b, p in clipped if a <= lo and b >= hi]
        key = min(covering, key=order.index).value if covering else UNNAMED
        out[key] += hi - lo
    return out
