"""Node-pressure evictions: told apart from Spot preemptions, counted per index, alerted once.

The Job's pod failure policy ignores the `DisruptionTarget` condition, so a Spot preemption
costs an index no retry. The kubelet sets the same condition (reason `TerminationByKubelet`)
when it evicts a pod for node pressure: a pod without limits that bursts past its memory
request on a full node is evicted rather than OOM-killed, and its index is retried without
end. So the controller tells them apart and counts evictions per index of the layer's
attempt (docs/ticks-and-evictions.md):

- a node-pressure eviction: `DisruptionTarget` with reason `TerminationByKubelet` and the
  pod's `status.reason` `Evicted` (the kubelet's eviction manager);
- free (not counted): every other disruption, i.e. Spot preemption as GKE performs it (a
  graceful node shutdown: `TerminationByKubelet` with `status.reason` `Terminated`, or
  `Shutdown` before Kubernetes 1.26), the scheduler's `PreemptionByScheduler`, the taint
  manager's and the pod GC's deletions (`DeletionByTaintManager`, `DeletionByPodGC`), an
  API-initiated eviction (`EvictionByEvictionAPI`: a drain, a scale-down), and a condition
  without a reason.

Once an index reaches `job.max_evictions_per_index` evictions it is alerted once
(`index_evicted_repeatedly`), and the layer's next attempt asks `job.oom_memory_factor` more
memory, as after an OOM kill (shared.reconcile.oom). The counts are kept as one packed string per
layer ("index:count,..."), not a map: a map would be one indexed Firestore field per index.
Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shared.model import intervals
from shared.model.state import LayerState
from shared.ports.cluster import PodInfo

DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"  # the condition's reason: the kubelet ended it
EVICTED = "Evicted"  # the pod's status.reason after the kubelet's eviction manager
ALERT_KIND = "index_evicted_repeatedly"


def is_node_pressure_eviction(
    reason: str | None, disruption_reason: str | None, status_reason: str | None
) -> bool:
    """Whether a failed pod (its PodInfo `reason`, the DisruptionTarget condition's reason
    and its `status.reason`) was evicted by the kubelet for node pressure."""
    return (
        reason == DISRUPTION_TARGET
        and disruption_reason == TERMINATION_BY_KUBELET
        and status_reason == EVICTED
    )


def pod_evicted(pod: PodInfo) -> bool:
    """A failed pod the kubelet evicted for node pressure (see the module docstring)."""
    return pod.phase == "Failed" and is_node_pressure_eviction(
        pod.reason, pod.disruption_reason, pod.status_reason
    )


def parse_counts(text: str) -> dict[int, int]:
    """ "3:1,17:2" -> {3: 1, 17: 2}. ValueError naming the bad part."""
    out: dict[int, int] = {}
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        index, sep, count = part.partition(":")
        try:
            i, n = int(index), int(count)
        except ValueError:
            raise ValueError(f"bad eviction count {part!r} in {text!r}: expected INDEX:N") from None
        if not sep or i < 0 or n < 1:
            raise ValueError(f"bad eviction count {part!r} in {text!r}: expected INDEX:N, N >= 1")
        out[i] = out.get(i, 0) + n
    return out


def format_counts(counts: dict[int, int]) -> str:
    """{17: 2, 3: 1} -> "3:1,17:2" (sorted by index; zero counts left out)."""
    return ",".join(f"{i}:{n}" for i, n in sorted(counts.items()) if n > 0)


def count_evictions(ls: LayerState, evicted_indexes: Iterable[int]) -> None:
    """Add one eviction per entry (an index evicted twice appears twice) to the layer."""
    counts = parse_counts(ls.faults.evictions)
    for index in evicted_indexes:
        counts[index] = counts.get(index, 0) + 1
    ls.faults.evictions = format_counts(counts)


def total_evictions(ls: LayerState) -> int:
    """Node-pressure evictions of the layer's current attempt, all indexes together."""
    return sum(parse_counts(ls.faults.evictions).values())


def evicted_repeatedly(ls: LayerState) -> bool:
    """Whether an index of this attempt reached the limit (its next attempt gets more memory)."""
    return bool(ls.faults.eviction_alerted_indexes)


def eviction_alert_details(ls: LayerState, max_per_index: int) -> dict[str, Any] | None:
    """The details of one `index_evicted_repeatedly` alert for the indexes that reached
    `max_per_index` evictions and were not alerted yet (marks them alerted), or None.
    `alerts.alert_body` adds each index's chunks."""
    counts = parse_counts(ls.faults.evictions)
    alerted = set(intervals.parse(ls.faults.eviction_alerted_indexes))
    fresh = sorted(i for i, n in counts.items() if n >= max_per_index and i not in alerted)
    if not fresh:
        return None
    ls.faults.eviction_alerted_indexes = intervals.format(alerted | set(fresh))
    return {
        "indexes": fresh,
        "evictions": {str(i): counts[i] for i in fresh},
        "max_evictions_per_index": max_per_index,
        "job": ls.job.name,
        "memory_request_gib": ls.pods.memory_request_gib,
        "fix": (
            "the kubelet evicts these pods for node memory pressure (they use more than their "
            "request) and the Job retries them without end: raise job.resources.memory for "
            "this layer (`pipeline apply`) or set job.oom_memory_factor, then `pipeline delete` "
            "and `pipeline submit` the layer (done chunks are skipped)"
        ),
    }
