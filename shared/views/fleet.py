"""A fleet of pods at a glance, for `pipeline top`: usage as a share of the request, its
percentiles, the pods over 90 %, the OOM count, and the highest, middle and lowest pods.
Pure: the caller supplies each running pod's usage and request.

The summary has the same size at 5 pods or 5000, so `top` keeps a fixed height. Shares are
usage / request (1.0 = exactly the request); a pod with no request of a resource is left out
of that resource's figures. Percentiles interpolate linearly between ranks (numpy's default).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PERCENTILES = (10, 50, 90, 99)
HOT = 0.9  # a pod over 90 % of its request is close to its limit (memory: an OOM kill)
OOM_REASON = "OOMKilled"


@dataclass(frozen=True)
class PodSample:
    """One running pod's usage against its requests."""

    name: str
    index: int
    cpu: float
    cpu_request: float
    memory_gib: float
    memory_request_gib: float

    @property
    def cpu_share(self) -> float | None:
        return self.cpu / self.cpu_request if self.cpu_request else None

    @property
    def memory_share(self) -> float | None:
        return self.memory_gib / self.memory_request_gib if self.memory_request_gib else None


@dataclass(frozen=True)
class Spread:
    """Percentiles and max of one resource's share of request over the fleet."""

    p10: float
    p50: float
    p90: float
    p99: float
    max: float
    over_90: int  # pods above HOT


@dataclass(frozen=True)
class FleetSummary:
    pods: int  # running pods with a usage sample
    cpu: Spread | None
    memory: Spread | None
    oom_kills: int  # attempts of the Job ended by the OOM killer
    highest: list[PodSample] = field(default_factory=list)  # by memory share, then CPU
    middle: list[PodSample] = field(default_factory=list)
    lowest: list[PodSample] = field(default_factory=list)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of ascending values, linear between ranks."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    pos = (len(sorted_values) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def spread(shares: Iterable[float]) -> Spread | None:
    """Percentiles, max and the count over 90 % of some shares (None if there are none)."""
    values = sorted(shares)
    if not values:
        return None
    p = [percentile(values, q) for q in PERCENTILES]
    return Spread(*p, max=values[-1], over_90=sum(v > HOT for v in values))


def _load(s: PodSample) -> tuple[float, float, str]:
    # Memory first: running out of it kills the pod, running out of CPU only slows it.
    return (s.memory_share or 0.0, s.cpu_share or 0.0, s.name)


def bands(samples: Sequence[PodSample], n: int = 3) -> tuple[list, list, list]:
    """The `n` most loaded pods, the `n` around the median, the `n` least loaded (each list
    most loaded first, no pod in two lists)."""
    ranked = sorted(samples, key=_load, reverse=True)
    if len(ranked) <= 3 * n:
        k = -(-len(ranked) // 3)
        return ranked[:k], ranked[k : 2 * k], ranked[2 * k :]
    mid = len(ranked) // 2 - n // 2
    return ranked[:n], ranked[mid : mid + n], ranked[-n:]


def summarize(samples: Sequence[PodSample], oom_kills: int = 0, n: int = 3) -> FleetSummary:
    """The fleet's summary (see the module doc)."""
    high, middle, low = bands(samples, n)
    return FleetSummary(
        pods=len(samples),
        cpu=spread(s.cpu_share for s in samples if s.cpu_share is not None),
        memory=spread(s.memory_share for s in samples if s.memory_share is not None),
        oom_kills=oom_kills,
        highest=high,
        middle=middle,
        lowest=low,
    )


def count_oom(reasons: Iterable[str | None]) -> int:
    """Pod attempts whose container the OOM killer ended."""
    return sum(r == OOM_REASON for r in reasons)
