"""Pod accounting: which pod attempts to record, and the usage they add to their layer.

Autopilot bills pod requests per second, so a layer's compute is the sum over its pod
attempts of requests x runtime. Each reconcile lists the Job's pods and records the ones that
finished since the last reconcile: those it saw unfinished before (`open_pods`), and those
created after its last listing (`pods_watermark`) that it never saw at all. Everything else
was recorded already, so a reconcile writes only what changed, however many batches the
layer has. Pure module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from shared.model.state import LayerState
from shared.ports.cluster import PodInfo
from shared.reconcile.evictions import count_evictions, is_node_pressure_eviction
from shared.reconcile.rightsize import PodFigures, note_usage

FINISHED = ("Succeeded", "Failed")
OOM_KILLED = "OOMKilled"  # the container's terminated reason when the OOM killer ended it


@dataclass(frozen=True)
class PodRecord:
    """One pod attempt, as stored in `runs/{run}/layers/{layer}/pods/{uid}`."""

    uid: str
    name: str
    index: int
    phase: str
    cpu: float
    memory_gib: float
    created: datetime | None
    started: datetime | None
    finished: datetime | None
    exit_code: int | None
    reason: str | None
    node: str
    disruption_reason: str | None = None  # the DisruptionTarget condition's reason
    status_reason: str | None = None  # the pod's status.reason (Evicted, Terminated, ...)
    # What it used over its life, where the cluster measures it (shared.reconcile.rightsize)
    peak_memory_gib: float | None = None
    cpu_used: float | None = None
    node_oom_killed: bool = False  # the node's OOM killer ended it (shared.reconcile.node_oom)

    @property
    def evicted(self) -> bool:
        """Evicted by the kubelet for node pressure (shared.reconcile.evictions), not preempted."""
        return is_node_pressure_eviction(self.reason, self.disruption_reason, self.status_reason)

    @property
    def seconds(self) -> float:
        if self.started is None or self.finished is None:
            return 0.0
        return max(0.0, (self.finished - self.started).total_seconds())

    def to_doc(self) -> dict[str, Any]:
        # By hand, not dataclasses.asdict: that deep-copies every field, and a reconcile at
        # full size converts thousands of these.
        doc = {name: getattr(self, name) for name in _FIELDS}
        doc["seconds"] = self.seconds
        return doc

    @classmethod
    def of(cls, pod: PodInfo) -> PodRecord:
        return cls(
            pod.uid,
            pod.name,
            pod.index,
            pod.phase,
            pod.cpu_request,
            pod.memory_request_gib,
            pod.created,
            pod.started,
            pod.finished,
            pod.exit_code,
            pod.reason,
            pod.node,
            pod.disruption_reason,
            pod.status_reason,
            pod.peak_memory_gib,
            pod.cpu_used,
            pod.node_oom_killed,
        )


_FIELDS = tuple(f.name for f in fields(PodRecord))


def _is_new(pod: PodInfo, ls: LayerState) -> bool:
    """Created after the last listing (so never seen), judged by the API server's clock."""
    if ls.pods.watermark is None or pod.created is None:
        return True
    if pod.created > ls.pods.watermark:
        return True
    return pod.created == ls.pods.watermark and pod.uid not in ls.pods.at_watermark


# Open pods are stored as short digests of their uids, packed OPEN_PAGE to a string: at
# 10,000 running pods a list of uids would be 10,000 array values that every reconcile
# deep-copies, compares and encodes, and 370 KB of a layer document capped at 1 MiB.
OPEN_PAGE = 2000


def pod_key(uid: str) -> str:
    """The 64-bit digest of a pod uid kept in `open_pods` (collisions: ~1e-11 at 10^4 pods)."""
    return hashlib.blake2b(uid.encode(), digest_size=8).hexdigest()


def pack_open(keys: Iterable[str]) -> list[str]:
    """Pod keys as a few comma-joined strings (sorted, so an unchanged set compares equal)."""
    ordered = sorted(keys)
    return [",".join(ordered[i : i + OPEN_PAGE]) for i in range(0, len(ordered), OPEN_PAGE)]


def unpack_open(packed: Iterable[str]) -> set[str]:
    """Inverse of pack_open; an older layer document's one-uid-per-entry list reads too."""
    return {key for entry in packed for key in entry.split(",") if key}


def _was_open(uid: str, open_before: set[str]) -> bool:
    return pod_key(uid) in open_before or uid in open_before  # the latter: older documents


def record_pods(
    ls: LayerState, pods: list[PodInfo], now: datetime, job_record: datetime | None = None
) -> list[PodRecord]:
    """Update the layer's accounting from a fresh listing of its Job's pods; returns the
    finished pods to store. Idempotent for a repeated listing against the same state.

    `job_record` is the latest time the Job itself vouches for its pods (its completion
    time, or the time of the event that reported them): a pod that vanished from the listing
    is closed there when that is later than its last sighting."""
    open_before = unpack_open(ls.pods.open)
    records = [
        PodRecord.of(p)
        for p in pods
        if p.phase in FINISHED and (_was_open(p.uid, open_before) or _is_new(p, ls))
    ]
    for rec in records:
        ls.pods.cpu_seconds += rec.cpu * rec.seconds
        ls.pods.memory_gib_seconds += rec.memory_gib * rec.seconds
        if rec.phase == "Succeeded":
            ls.pods.succeeded += 1
            ls.pods.succeeded_runtime_s += rec.seconds
        elif rec.reason == "DisruptionTarget":
            # Preempted or evicted: the Job's DisruptionTarget rule spends no retry on either.
            ls.pods.preempted += 1
        else:
            ls.pods.failed += 1
            # Either OOM killer: the container's limit (OOMKilled) or the node's.
            ls.faults.oom_killed += rec.reason == OOM_KILLED or rec.node_oom_killed
            ls.faults.node_oom_killed += rec.reason != OOM_KILLED and rec.node_oom_killed
    count_evictions(ls, (rec.index for rec in records if rec.evicted))
    note_usage(ls, measured(records))
    _close_vanished(ls, pods, open_before, job_record, now)
    ls.pods.listed_at = now
    running = [p for p in pods if p.phase not in FINISHED]
    ls.pods.open = pack_open(pod_key(p.uid) for p in running)
    ls.pods.running_cpu_seconds = sum(p.cpu_request * _age(p, now) for p in running)
    ls.pods.running_memory_gib_seconds = sum(p.memory_request_gib * _age(p, now) for p in running)
    stamps = [p.created for p in pods if p.created is not None]
    if stamps:
        mark = max(stamps)
        if ls.pods.watermark is None or mark >= ls.pods.watermark:
            same = {p.uid for p in pods if p.created == mark}
            keep = set(ls.pods.at_watermark) if mark == ls.pods.watermark else set()
            ls.pods.watermark, ls.pods.at_watermark = mark, sorted(same | keep)
    return records


def measured(records: Iterable[PodRecord]) -> list[PodFigures]:
    """The usage figures of the succeeded pods among `records` that carry them."""
    return [
        PodFigures(r.cpu_used, r.peak_memory_gib)
        for r in records
        if r.phase == "Succeeded" and r.cpu_used is not None and r.peak_memory_gib is not None
    ]


def note_earlier_usage(
    ls: LayerState, pods: Iterable[PodInfo], records: Iterable[PodRecord]
) -> None:
    """Keep the figures of the layer's succeeded pods recorded in earlier reconciles (before
    their usage was known: monitoring's, read once the Job finished; shared.ports.pod_usage). The
    pods in `records` were recorded now, with their figures noted by record_pods."""
    now_recorded = {r.uid for r in records}
    earlier = [PodRecord.of(p) for p in pods if p.uid not in now_recorded]
    note_usage(ls, measured(earlier))


def _close_vanished(
    ls: LayerState,
    pods: list[PodInfo],
    open_before: set[str],
    job_record: datetime | None,
    now: datetime,
) -> None:
    """Pods open at the last listing and absent from this one were deleted (suspend,
    scale-down, pod GC, a lost node) before anyone saw them finish: close them at their last
    sighting, keeping the usage they had accrued by then. That is the last listing's running
    total less what the pods still listed had accrued at that time. When the Job's record of
    them (`job_record`, capped at `now`) is later than that sighting, they ran on until then:
    each accrues the layer's per-pod request from the sighting to that record. The listing
    keeps no per-pod request or start for a vanished pod, so this counts a pod still pending
    at its last sighting as running: an upper bound, as a budget guard wants."""
    listed = {pod_key(p.uid) for p in pods} | {p.uid for p in pods}
    vanished = open_before - listed
    if ls.pods.listed_at is None or not vanished:
        return
    still = [p for p in pods if _was_open(p.uid, open_before)]
    seen = ls.pods.listed_at
    cpu = ls.pods.running_cpu_seconds - sum(p.cpu_request * _age(p, seen) for p in still)
    mem = ls.pods.running_memory_gib_seconds - sum(
        p.memory_request_gib * _age(p, seen) for p in still
    )
    ls.pods.cpu_seconds += max(0.0, cpu)
    ls.pods.memory_gib_seconds += max(0.0, mem)
    if job_record is None:
        return
    unseen_s = max(0.0, (min(job_record, now) - seen).total_seconds())
    ls.pods.cpu_seconds += len(vanished) * ls.pods.cpu_request * unseen_s
    ls.pods.memory_gib_seconds += len(vanished) * ls.pods.memory_request_gib * unseen_s


def _age(pod: PodInfo, now: datetime) -> float:
    return max(0.0, (now - pod.started).total_seconds()) if pod.started else 0.0


def close_layer(ls: LayerState) -> None:
    """A finished layer has no running pods left to accrue: pods still open (a failed Job's,
    deleted with it) are closed at their last sighting, their usage so far kept."""
    ls.pods.cpu_seconds += ls.pods.running_cpu_seconds
    ls.pods.memory_gib_seconds += ls.pods.running_memory_gib_seconds
    ls.pods.open, ls.pods.running_cpu_seconds, ls.pods.running_memory_gib_seconds = [], 0.0, 0.0
