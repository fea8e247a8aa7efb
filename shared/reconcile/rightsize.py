"""Right-sized requests: what a layer's pods used against what they asked, and the requests
the next layers should ask for (docs/canary-and-rightsize.md). Pure: no I/O.

After a layer's pods finish, their mean CPU (the layer's p95 over its pods) and their peak
memory (the highest over its pods) are kept on the layer (`note_usage`). The suggestion for a
layer is made from the layers of its stage below it that have figures: CPU from the nearest
one's p95, memory from the nearest one's peak grown by the per-layer factor fitted over all of
them (memory grows with the layer: a parent chunk holds its children's nodes), both times the
margin and snapped to Autopilot. A layer with no layer below it that has figures is sized from
its own (what it should have asked). The money a suggestion saves is the layer's pod-seconds
at its requests less the same pod-seconds at the suggestion.

With `job.rightsize: auto` the layers get these requests (`rightsized_layers`); the margin
grows by OOM_MARGIN_STEP after each right-sized layer that saw OOM kills: the fit was too
tight once, so it is trusted less for the layers above it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.jobs.autopilot import Requests, ResourceLimitError, snap_requests
from shared.model.state import LayerState
from shared.money.pricing import Rate, pod_cost

RIGHTSIZE_MODES = ("off", "suggest", "auto")
SAMPLES_KEPT = 200  # per layer: the latest succeeded pods' figures (a p95 over 200 is stable)
MAX_GROWTH = 16.0  # per layer: a fit steeper than this is noise from one tiny layer
OOM_MARGIN_STEP = 1.25  # the margin's growth per right-sized layer that saw OOM kills


@dataclass(frozen=True)
class PodFigures:
    """What one finished pod used: mean vCPU over its life and peak memory (GiB)."""

    cpu_used: float
    peak_memory_gib: float


def note_usage(ls: LayerState, pods: Iterable[PodFigures]) -> None:
    """Keep the figures of the layer's newly succeeded pods (the latest SAMPLES_KEPT)."""
    for pod in pods:
        ls.pods.used_cpu.append(round(pod.cpu_used, 4))
        ls.pods.used_memory_gib.append(round(pod.peak_memory_gib, 4))
    del ls.pods.used_cpu[:-SAMPLES_KEPT]
    del ls.pods.used_memory_gib[:-SAMPLES_KEPT]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` percentile (0 < q <= 100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class LayerUsage:
    """What a layer's finished pods used, against what they asked."""

    stage: str
    layer: int
    pods: int  # pods with figures
    cpu_request: float
    memory_request_gib: float
    cpu_p95: float
    peak_memory_gib: float
    pod_seconds: float  # of every pod attempt (what was billed)


def layer_usage(ls: LayerState) -> LayerUsage | None:
    """The layer's usage, None while none of its pods has figures."""
    if not ls.pods.used_cpu or not ls.pods.used_memory_gib:
        return None
    seconds = (
        ls.pods.cpu_seconds / ls.pods.cpu_request
        if ls.pods.cpu_request
        else ls.pods.succeeded_runtime_s
    )
    return LayerUsage(
        ls.stage,
        ls.layer,
        len(ls.pods.used_memory_gib),
        ls.pods.cpu_request,
        ls.pods.memory_request_gib,
        percentile(ls.pods.used_cpu, 95),
        max(ls.pods.used_memory_gib),
        seconds,
    )


def memory_growth(points: Sequence[tuple[int, float]]) -> float:
    """Per-layer growth of peak memory, fitted (least squares on its log) over (layer,
    peak GiB) points: 1.0 with fewer than two layers; clamped to [1, MAX_GROWTH] because a
    higher layer never needs less than the one below (its chunks contain the children's)."""
    pts = [(x, math.log(y)) for x, y in points if y > 0]
    if len({x for x, _ in pts}) < 2:
        return 1.0
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return min(MAX_GROWTH, max(1.0, math.exp(slope)))


def rightsized_layers(
    layers: Sequence[LayerState], margin: float, compute_class: str = ""
) -> dict[int, Requests]:
    """`job.rightsize: auto` for one stage's layers (lowest first): the requests of every
    layer that has layers with figures below it, from them (size_from), the margin raised
    for each such layer below it that saw OOM kills. Deterministic in the layers' state, so
    a running layer keeps the requests it started with (the layers below it are done)."""
    out: dict[int, Requests] = {}
    usages: list[LayerUsage] = []
    misses = 0
    for ls in layers:
        if usages and not ls.done_before:
            try:
                out[ls.layer] = size_from(
                    usages, ls.layer, margin * OOM_MARGIN_STEP**misses, compute_class
                )
                misses += bool(ls.faults.oom_killed)
            except ResourceLimitError:
                pass  # past the class's ceiling: the configured request (and its refusal)
        usage = layer_usage(ls)
        if usage is not None:
            usages.append(usage)
    return out


def size_from(
    below: Sequence[LayerUsage], layer: int, margin: float, compute_class: str = ""
) -> Requests:
    """The requests of `layer` from the usage of layers of its stage (lowest first, at least
    one): the nearest one's CPU p95 and its peak memory grown by the fitted factor to
    `layer`, times `margin`, snapped. ResourceLimitError past the class's ceiling."""
    nearest = below[-1]
    growth = memory_growth([(u.layer, u.peak_memory_gib) for u in below])
    memory = nearest.peak_memory_gib * growth ** max(0, layer - nearest.layer) * margin
    return snap_requests(max(nearest.cpu_p95, 0.001) * margin, memory, compute_class)


@dataclass(frozen=True)
class Suggestion:
    """The requests suggested for one layer and, once it ran, how they compare with what
    its pods used and what they would have saved."""

    stage: str
    layer: int
    basis: str  # "L2-L3": fitted over those layers below; "own": from its own pods
    requested_cpu: float
    requested_memory_gib: float
    suggested_cpu: float
    suggested_memory_gib: float
    used_cpu_p95: float | None = None  # None: the layer has not run pods yet
    used_peak_memory_gib: float | None = None
    savings_usd: float | None = None  # on its pod-seconds so far (negative: it asks more)
    covered: bool | None = None  # the suggestion holds the layer's peak memory
    applied: bool = False  # job.rightsize: auto gave the layer these requests

    def to_dict(self) -> dict[str, object]:
        return {
            "stage": self.stage,
            "layer": self.layer,
            "basis": self.basis,
            "requested": {"cpu": self.requested_cpu, "memory_gib": self.requested_memory_gib},
            "suggested": {"cpu": self.suggested_cpu, "memory_gib": self.suggested_memory_gib},
            "used": {"cpu_p95": self.used_cpu_p95, "peak_memory_gib": self.used_peak_memory_gib},
            "savings_usd": None if self.savings_usd is None else round(self.savings_usd, 6),
            "covered": self.covered,
            "applied": self.applied,
        }


def suggest(
    layers: Sequence[LayerState],
    requested: dict[str, Requests],
    margins: dict[str, float],
    rates: dict[str, Rate],
    compute_classes: dict[str, str] | None = None,
    applied: dict[str, Requests] | None = None,
) -> list[Suggestion]:
    """A suggestion for every layer that has figures below it or of its own, in build order
    (`layers` as RunState.ordered_layers gives them). `requested` maps a layer key to its
    configured requests (used for layers that have not started), `margins` each stage to its
    margin, `rates` each stage to its price, `compute_classes` each stage to its class;
    `applied` the requests `job.rightsize: auto` gives layers (rightsized_layers), as is."""
    classes = compute_classes or {}
    applied = applied or {}
    out: list[Suggestion] = []
    for ls in layers:
        below = [
            u
            for o in layers
            if o.stage == ls.stage and o.layer < ls.layer and (u := layer_usage(o)) is not None
        ]
        own = layer_usage(ls)
        basis_usage = below or ([own] if own is not None else [])
        if not basis_usage:
            continue
        basis = f"L{below[0].layer}-L{below[-1].layer}" if below else "own"
        if len(below) == 1:
            basis = f"L{below[0].layer}"
        req = requested.get(ls.key)
        cpu = ls.pods.cpu_request or (req.cpu if req else 0.0)
        mem = ls.pods.memory_request_gib or (req.memory_gib if req else 0.0)
        try:
            sug = applied.get(ls.key) or size_from(
                basis_usage, ls.layer, margins[ls.stage], classes.get(ls.stage, "")
            )
        except ResourceLimitError:
            continue  # past the class's ceiling: nothing cheaper to suggest
        savings = covered = None
        if own is not None:
            rate = rates[ls.stage]
            spent = pod_cost(rate, cpu, mem, own.pod_seconds)
            savings = spent - pod_cost(rate, sug.cpu, sug.memory_gib, own.pod_seconds)
            covered = sug.memory_gib >= own.peak_memory_gib
        out.append(
            Suggestion(
                ls.stage,
                ls.layer,
                basis,
                cpu,
                mem,
                sug.cpu,
                sug.memory_gib,
                own.cpu_p95 if own else None,
                own.peak_memory_gib if own else None,
                savings,
                covered,
                ls.key in applied,
            )
        )
    return out
