"""The port to what a cluster's monitoring recorded of finished pods over their lives: peak
memory and mean CPU, where the cluster itself does not report them in `PodInfo` (GKE: Cloud
Monitoring's container metrics, adapters.google.pod_usage; the local stack: the process
kubelet's /proc samples, adapters.local.pod_usage). Read once per finished Job's pods, by the
observe step (docs/canary-and-rightsize.md). Pure: the port, its type and the merge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from shared.ports.cluster import PodInfo


@dataclass(frozen=True)
class PodLifeUsage:
    """What one pod used over its life as monitoring recorded it: its highest memory (GiB)
    and its mean vCPU (CPU seconds over the span its points cover). None: no usable point
    (a pod shorter than the sampling period may have none)."""

    peak_memory_gib: float | None = None
    cpu_used: float | None = None


class PodUsageReader(Protocol):
    """Reads the lifetime usage of a finished Job's pods."""

    def life_usage(self, job_name: str, pods: Sequence[PodInfo]) -> dict[str, PodLifeUsage]:
        """Usage by pod name for those of `pods` (of Job `job_name`) that monitoring has
        points for; a pod without points is absent."""
        ...


def needs_usage(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """The succeeded pods whose usage the cluster did not report (what a reader is asked)."""
    return [
        p
        for p in pods
        if p.phase == "Succeeded" and (p.peak_memory_gib is None or p.cpu_used is None)
    ]


def with_usage(pods: Sequence[PodInfo], usage: Mapping[str, PodLifeUsage]) -> list[PodInfo]:
    """`pods` with the fields the cluster left empty filled from `usage` (by pod name); a
    figure the cluster reported is never replaced."""
    out = []
    for p in pods:
        u = usage.get(p.name)
        if u is None:
            out.append(p)
            continue
        out.append(
            replace(
                p,
                peak_memory_gib=p.peak_memory_gib
                if p.peak_memory_gib is not None
                else u.peak_memory_gib,
                cpu_used=p.cpu_used if p.cpu_used is not None else u.cpu_used,
            )
        )
    return out
