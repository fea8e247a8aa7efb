"""The advice of an `oom_killed` alert: which of the two levers to pull first. Pure.

A layer's pod runs `PCG_N_PROCESSES` = `job.processes_per_vcpu` x its whole vCPU processes
that share its memory. With more than one process the cheapest fix is fewer processes per
vCPU (each gets more of the same request: the predecessor's advice); with one process only
more memory helps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class OomLever(Enum):
    """What an OOM-killed layer's next attempt should change."""

    FEWER_PROCESSES = "fewer_processes"
    MORE_MEMORY = "more_memory"


@dataclass(frozen=True)
class OomAdvice:
    """The levers in the order to try them, and the sentence that says so."""

    levers: tuple[OomLever, ...]
    fix: str


def oom_advice(processes: int, processes_per_vcpu: int, memory_gib: float) -> OomAdvice:
    """The advice for a layer whose pods run `processes` processes in `memory_gib` (the
    request), configured at `processes_per_vcpu` (0 reads as 1)."""
    per_vcpu = max(1, processes_per_vcpu)
    more_memory = (
        "raise job.resources.memory for this layer (a per-layer override, `pipeline apply`) "
        "or set job.oom_memory_factor"
    )
    then = "then `pipeline submit` once the layer has failed"
    if processes > 1 and per_vcpu > 1:
        each = memory_gib / processes
        fix = (
            f"fewer processes first: {processes} processes share {memory_gib:g} GiB "
            f"({each:.2g} GiB each); lower job.processes_per_vcpu from {per_vcpu} "
            f"(to {per_vcpu - 1}: each process gets more of the same request, at no extra "
            f"cost); or {more_memory}; {then}"
        )
        return OomAdvice((OomLever.FEWER_PROCESSES, OomLever.MORE_MEMORY), fix)
    if processes > 1:
        # One per vCPU already: fewer means job.parallel: false (one process), slower.
        fix = (
            f"{more_memory}: {processes} processes at 1 per vCPU share {memory_gib:g} GiB, "
            f"and fewer processes per vCPU is not possible (job.parallel: false runs one, "
            f"slower); {then}"
        )
        return OomAdvice((OomLever.MORE_MEMORY, OomLever.FEWER_PROCESSES), fix)
    fix = f"{more_memory}: its pods run one process, so only more memory helps; {then}"
    return OomAdvice((OomLever.MORE_MEMORY,), fix)
