"""A layer's process start-up, for the build's timeline (shared.views.build_timeline): the
first of its pods to succeed, and what its worker's summary line says of its process's start
(interpreter, imports, clients, the graph's metadata) before its first chunk began. Read once
a layer: the observer reads that pod's log in the reconcile that first sees a pod of the
layer succeed. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from shared.model.state import LayerState
from shared.ports.cluster import PodInfo
from shared.reconcile.canary import pod_summary


def first_succeeded(pods: Sequence[PodInfo]) -> PodInfo | None:
    """The pod that succeeded first (None: none has)."""
    done = [p for p in pods if p.phase == "Succeeded" and p.finished is not None]
    return min(done, key=lambda p: (p.finished, p.name)) if done else None


def note_process_start(ls: LayerState, log_tail: str) -> None:
    """Keep the start-up the first succeeded pod's worker reported (`startup_s` of its
    summary line); nothing when it reported none (an image's harness logs no timings)."""
    summary = pod_summary(log_tail)
    if ls.timing.process_start_s is None and summary is not None:
        ls.timing.process_start_s = round(summary.startup_s, 3)
