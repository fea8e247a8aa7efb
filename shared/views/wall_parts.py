"""Where a build's wall time goes: named spans (approval wait, advance, pod start-up, chunk
compute, tail, the Job's completion, setup passes; `shared.views.build_timeline`) laid over
the run's wall interval, so that wall time is exactly the sum of the named parts plus the
remainder no span names. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Part(Enum):
    """A named part of wall time; earlier members win where spans overlap."""

    COMPUTE = "compute"
    TAIL = "tail"
    PROCESS_START = "process_start"
    STARTUP = "startup"
    COMPLETION = "completion"
    SETUP = "setup"
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


@dataclass(frozen=True)
class Gap:
    """An interval of wall time no span covers, with the spans it lies between (None at the
    run's start or end), so the part no one can name is at least placed."""

    start: float
    end: float
    after: Span | None
    before: Span | None

    def describe(self) -> str:
        """e.g. `1.2 s after ingest-L2 completion, before ingest-L3 advance`."""
        after = f"after {self.after.layer} {self.after.part.value}" if self.after else "at start"
        before = f"before {self.before.layer} {self.before.part.value}" if self.before else "at end"
        return f"{self.end - self.start:.1f} s {after}, {before}"


def gaps(spans: Iterable[Span], wall: float, at_least: float = 0.0) -> list[Gap]:
    """The intervals of [0, wall] no span covers, longer than `at_least`, in time order."""
    ordered = sorted((s for s in spans if s.end > s.start), key=lambda s: (s.start, s.end))
    out: list[Gap] = []
    reach, last = 0.0, None  # covered up to `reach`, by `last` (the span ending latest)
    for s in ordered:
        if s.start > reach and min(s.start, wall) - reach > at_least:
            out.append(Gap(reach, min(s.start, wall), last, s))
        if s.end > reach:
            reach, last = s.end, s
    if wall - reach > at_least:
        out.append(Gap(reach, wall, last, None))
    return out
