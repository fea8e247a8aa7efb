"""Hung workers: running pods whose chunk progress has not moved for too long. Pure module.

A pod that deadlocks or blocks on a read keeps running (and renewing its chunk claims) while
building nothing, holding its Job index until the whole layer stalls. The controller treats a
running pod as hung once its newest sign of progress is older than

    hung_after_s = max(hung_after_chunks x the layer's p95 chunk time, hung_floor_s)

(`controller.hung_after_chunks`, `controller.hung_floor_s`; before any pod of the layer has
succeeded only the floor applies; where only logs are read, the chunk time is a batch's, see
`layer_hung_after_s`). A pod's progress is the newest of: its start, the newest
line of its log, the newest done marker (`chunk_done` cell) in its batch's chunk rows. The
last two are what a PyChunkedGraph image produces too, not only our worker.

Reading logs and markers is I/O, so the controller reads them only for `candidates`: running
pods started at least `hung_after_s` ago (a younger pod cannot be hung whatever it did), not
already handled. `find_hung` then decides from what was read. See docs/hung-workers.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shared.config.config import PipelineConfig
from shared.jobs.layer_spec import layer_spec
from shared.model.layers import chunk_id
from shared.model.state import LayerState
from shared.ports.cluster import PodInfo
from shared.reconcile.pod_accounting import PodRecord

CHUNK_SAMPLES = 200  # per-chunk times kept on a layer (its latest succeeded pods')
HANDLED_KEEP = 500  # hung pods remembered per layer (so each is deleted and alerted once)
DEFAULT_AFTER_CHUNKS = 5.0
DEFAULT_FLOOR_S = 1800.0


class DoneMarkerTimes(Protocol):
    """Reads when chunks were marked done (the graph table's `chunk_done` cells)."""

    def newest_done(
        self, cfg: PipelineConfig, stage: str, chunk_ids: Sequence[int]
    ) -> datetime | None:
        """The newest done marker's write time among `chunk_ids` of `stage` (None: none)."""


def window_chunk_ids(cfg: PipelineConfig, stage: str, layer: int, index: int) -> list[int]:
    """The chunk ids (ledger row ids) of Job index `index` of a layer: its batch's window."""
    spec = layer_spec(cfg, stage, layer)
    bits = cfg.ds.graph_config.SPATIAL_BITS
    return [chunk_id(layer, c, spec.n_layers, bits) for c in spec.batch_chunks(index)]


def plan_batch(cfg: PipelineConfig, ls: LayerState) -> int:
    """The chunks one pod of the layer builds (its batch, at most the layer's chunks)."""
    spec = layer_spec(cfg, ls.stage, ls.layer)
    return min(spec.batch_size, spec.chunks)


@dataclass(frozen=True)
class HungPod:
    """A running pod found hung: which, since when it made no progress, for how long."""

    name: str
    uid: str
    index: int
    last_progress: datetime
    idle_s: float
    hung_after_s: float
    log_tail: str = ""  # filled by the controller (the pod is deleted before publishing)


def p95(samples: Iterable[float]) -> float | None:
    """The 95th percentile (nearest rank) of `samples`; None if there are none."""
    ordered = sorted(samples)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def hung_after_s(after_chunks: float, floor_s: float, p95_chunk_s: float | None) -> float:
    """Seconds without progress after which a running pod is hung: `after_chunks` times the
    layer's p95 chunk time, never less than `floor_s` (only the floor without a p95)."""
    if p95_chunk_s is None:
        return floor_s
    return max(after_chunks * p95_chunk_s, floor_s)


def layer_hung_after_s(
    ls: LayerState, after_chunks: float, floor_s: float, chunks_per_signal: int = 1
) -> float:
    """`hung_after_s` for a layer, from the chunk times its succeeded pods recorded.
    `chunks_per_signal`: the chunks a pod may build between two signs of progress (1 when
    done markers are read; the batch when only logs are, as a worker may log once a batch),
    so a healthy pod is never judged between two of them."""
    chunk = p95(ls.pods.chunk_s_samples)
    per_signal = None if chunk is None else chunk * max(1, chunks_per_signal)
    return hung_after_s(after_chunks, floor_s, per_signal)


def note_chunk_times(ls: LayerState, records: Iterable[PodRecord], chunks_per_pod: int) -> None:
    """Add the per-chunk time of each newly recorded succeeded pod (its runtime over the
    chunks of a batch) to the layer's samples, keeping the latest CHUNK_SAMPLES. A pod's
    start-up is counted in, so the estimate errs long (a later hung verdict, never an early
    one)."""
    per_pod = max(1, chunks_per_pod)
    fresh = [r.seconds / per_pod for r in records if r.phase == "Succeeded" and r.seconds > 0]
    if fresh:
        ls.pods.chunk_s_samples = (ls.pods.chunk_s_samples + fresh)[-CHUNK_SAMPLES:]


def candidates(
    pods: Iterable[PodInfo], now: datetime, after_s: float, handled: Iterable[str] = ()
) -> list[PodInfo]:
    """Running pods old enough to be hung (started `after_s` or more before `now`) and not
    handled yet (`handled`: uids already deleted as hung): the only pods whose logs and
    markers the controller reads."""
    done = set(handled)
    return [
        p
        for p in pods
        if p.phase == "Running"
        and p.started is not None
        and p.uid not in done
        and (now - p.started).total_seconds() >= after_s
    ]


def find_hung(
    pods: Iterable[PodInfo],
    progress: Mapping[str, Iterable[datetime | None]],
    now: datetime,
    after_s: float,
) -> list[HungPod]:
    """The pods among `pods` (candidates) whose newest progress is `after_s` or more before
    `now`. `progress` maps a pod name to the times its signals last moved (newest log line,
    newest done marker of its batch; None: that signal had nothing); a pod's start counts as
    progress, so a pod with no signal at all is judged from its start."""
    out = []
    for pod in pods:
        if pod.phase != "Running" or pod.started is None:
            continue
        stamps = [t for t in progress.get(pod.name, ()) if t is not None]
        last = max([pod.started, *stamps])
        idle = (now - last).total_seconds()
        if idle >= after_s:
            out.append(HungPod(pod.name, pod.uid, pod.index, last, idle, after_s))
    return out


def mark_handled(ls: LayerState, hung: Iterable[HungPod]) -> list[HungPod]:
    """Record the hung pods not handled before on the layer (counted in `pods_hung`, their
    uids remembered so a pod is deleted and alerted once); returns those new ones."""
    known = set(ls.faults.hung_pod_uids)
    new = [h for h in hung if h.uid not in known]
    if new:
        ls.faults.hung += len(new)
        ls.faults.hung_pod_uids = (ls.faults.hung_pod_uids + [h.uid for h in new])[-HANDLED_KEEP:]
    return new
