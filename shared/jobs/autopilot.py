"""Pod requests snapped to GKE Autopilot's billing grid, per compute class.

Autopilot bills requests, not usage, and rewrites a request it does not accept: one below the
minimum or outside the class's CPU:memory ratio is raised (billed at the raised value, which
the operator then never sees in the config), one above the class's ceiling is rejected at pod
creation, long after the controller submitted the Job. Snapping here makes the request in the
manifest exactly what is billed, and refuses a ceiling breach while the config is loaded.

Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.jobs.node_packing import fill_node

if TYPE_CHECKING:  # annotations only: the worker image has no pydantic
    from shared.config.config import JobSettings

CPU_STEP_M = 250  # millicores: requests move in quarter vCPUs
MEM_STEP_MI = 256  # MiB: a quarter GiB, fine enough to track a curve, coarse enough to read
MIN_CPU_M = 250
MIN_MEM_MI = 512
GENERAL_PURPOSE = "general-purpose"
# Float noise (0.1 + 0.2, curve arithmetic) must not push an exact grid value one step up.
_EPS = 1e-9


class ResourceLimitError(ValueError):
    """A request exceeds what the compute class can schedule; the message names the fix."""


@dataclass(frozen=True)
class ClassLimits:
    """Autopilot's bounds for one compute class: GiB per vCPU and the largest pod."""

    min_ratio: float | None  # GiB per vCPU; None: the class enforces no ratio
    max_ratio: float | None
    max_cpu: float | None  # vCPU; None: no ceiling known here (the cluster still enforces one)
    max_memory_gib: float | None


# Autopilot's documented bounds for pod-based classes (resource-requests page, at the time of
# writing). General-purpose is the one this project relies on and the predecessor enforced.
# Balanced and Scale-Out (x86) figures are the documented maxima; where a region lacks the
# larger machine series the cluster may reject earlier, which we cannot know offline.
# Node-based classes (Performance, Accelerator) and custom ComputeClasses are sized by the
# machine they get, so they are passed through on the grid with no ratio and no ceiling.
CLASS_LIMITS: dict[str, ClassLimits] = {
    GENERAL_PURPOSE: ClassLimits(1.0, 6.5, 30.0, 110.0),
    "balanced": ClassLimits(1.0, 8.0, 222.0, 851.0),
    "scale-out": ClassLimits(4.0, 4.0, 54.0, 216.0),
}
_PASS_THROUGH = ClassLimits(None, None, None, None)


@dataclass(frozen=True)
class Requests:
    """A snapped pod request: vCPU and GiB, both exact multiples of the grid."""

    cpu: float
    memory_gib: float

    @property
    def millicores(self) -> int:
        return round(self.cpu * 1000)

    @property
    def memory_mib(self) -> int:
        return round(self.memory_gib * 1024)

    @property
    def cpu_str(self) -> str:
        """Kubernetes quantity, e.g. "750m"."""
        return f"{self.millicores}m"

    @property
    def memory_str(self) -> str:
        """Kubernetes quantity, e.g. "1536Mi"."""
        return f"{self.memory_mib}Mi"


def normalize_class(compute_class: str) -> str:
    """The canonical lower-case key of a compute class ("" means general-purpose)."""
    name = (compute_class or "").strip().lower()
    return name or GENERAL_PURPOSE


def is_general_purpose(compute_class: str) -> bool:
    """True for the default class (which a pod selects by naming no class at all)."""
    return normalize_class(compute_class) == GENERAL_PURPOSE


def limits_for(compute_class: str) -> ClassLimits:
    """The bounds snap_requests applies for `compute_class` (unknown classes: none)."""
    return CLASS_LIMITS.get(normalize_class(compute_class), _PASS_THROUGH)


def _ceil_steps(value: float, step: int) -> int:
    """`value` (already in the step's unit) rounded up to a multiple of `step`."""
    return math.ceil(value / step - _EPS) * step


def _ratio(cpu_m: int, mem_mi: int) -> float:
    """GiB per vCPU."""
    return (mem_mi / 1024) / (cpu_m / 1000)


def snap_requests(cpu: float, memory_gib: float, compute_class: str = "") -> Requests:
    """The cheapest valid Autopilot request covering `cpu` vCPU and `memory_gib` GiB.

    CPU rounds up to 0.25 vCPU (at least 0.25), memory up to 0.25 GiB (at least 0.5). Outside
    the class's GiB-per-vCPU ratio the smaller side is raised (memory to the low ratio, or CPU
    to just enough for the high one), never the larger one lowered. Past the class's ceiling:
    ResourceLimitError.
    """
    if not (cpu > 0 and memory_gib > 0) or math.isinf(cpu) or math.isinf(memory_gib):
        raise ValueError(f"requests must be positive and finite, got cpu={cpu} memory={memory_gib}")
    limits = limits_for(compute_class)
    cpu_m = max(MIN_CPU_M, _ceil_steps(cpu * 1000, CPU_STEP_M))
    mem_mi = max(MIN_MEM_MI, _ceil_steps(memory_gib * 1024, MEM_STEP_MI))
    # Two passes settle it: raising CPU for the high ratio can break the low one only when the
    # ratio band is narrow (Scale-Out's fixed 1:4), and the second pass fixes memory.
    for _ in range(2):
        if limits.min_ratio is not None and _ratio(cpu_m, mem_mi) < limits.min_ratio - _EPS:
            mem_mi = _ceil_steps(cpu_m / 1000 * limits.min_ratio * 1024, MEM_STEP_MI)
        if limits.max_ratio is not None and _ratio(cpu_m, mem_mi) > limits.max_ratio + _EPS:
            cpu_m = _ceil_steps(mem_mi / 1024 / limits.max_ratio * 1000, CPU_STEP_M)
    snapped = Requests(cpu=cpu_m / 1000, memory_gib=mem_mi / 1024)
    _check_ceiling(snapped, compute_class, limits)
    return snapped


def _check_ceiling(req: Requests, compute_class: str, limits: ClassLimits) -> None:
    over_cpu = limits.max_cpu is not None and req.cpu > limits.max_cpu + _EPS
    over_mem = limits.max_memory_gib is not None and req.memory_gib > limits.max_memory_gib + _EPS
    if not (over_cpu or over_mem):
        return
    name = normalize_class(compute_class)
    hint = (
        "set job.compute_class (e.g. Balanced) for a larger pod"
        if name == GENERAL_PURPOSE
        else "choose a larger job.compute_class"
    )
    raise ResourceLimitError(
        f"request {req.cpu:g} vCPU / {req.memory_gib:g} GiB (snapped) exceeds the Autopilot "
        f"{name} ceiling of {limits.max_cpu:g} vCPU / {limits.max_memory_gib:g} GiB: {hint}, "
        "or lower this layer's request in job.resources.overrides"
    )


def layer_requests(job: JobSettings, layer: int) -> Requests:
    """Snapped requests of one layer: the resource curves, then that layer's overrides, then
    (`job.resources.pack`, curve layers only) grown to fill the node they force."""
    res = job.resources
    cpu, memory = res.cpu.at(layer), res.memory.at(layer)
    override = res.overrides.get(layer)
    if override is not None:  # an explicit per-layer value beats the curve
        cpu = override.cpu if override.cpu is not None else cpu
        memory = override.memory if override.memory is not None else memory
    elif res.pack:
        # Never over an override (even one naming only memory): that layer's numbers were
        # given exactly, and growing them would overrule the most specific instruction.
        packed = fill_node(cpu, memory, max_cpu=limits_for(job.compute_class).max_cpu)
        cpu, memory = packed.cpu, packed.memory_gib
    try:
        return snap_requests(cpu, memory, job.compute_class)
    except ResourceLimitError as e:
        raise ResourceLimitError(f"layer {layer}: {e}") from None
