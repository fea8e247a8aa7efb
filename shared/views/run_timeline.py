"""A run over time, for `pipeline report`: every pod attempt with its outcome, how many pods
ran at each moment against what the ramp allowed, and chunks done over time per layer. Pure:
the caller passes the stored pod records (`shared.reconcile.pod_accounting.PodRecord` docs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.config.config import Ramp
from shared.model.state import RunState
from shared.reconcile.parallelism import parallelism_target
from shared.views.progress import LayerSize

OUTCOMES = ("succeeded", "failed", "preempted", "oom", "running")


@dataclass(frozen=True)
class Attempt:
    """One pod attempt on the timeline."""

    layer: str  # layer key, e.g. ingest-L3
    index: int
    pod: str
    start: datetime
    end: datetime
    outcome: str  # one of OUTCOMES
    exit_code: int | None = None
    reason: str | None = None


def outcome(record: Mapping[str, Any]) -> str:
    """succeeded, preempted (Spot reclaim / eviction), oom, failed, or running."""
    reason = record.get("reason") or ""
    if record.get("phase") == "Succeeded":
        return "succeeded"
    if reason == "DisruptionTarget":
        return "preempted"
    if reason == "OOMKilled":
        return "oom"
    if record.get("phase") == "Failed":
        return "failed"
    return "running"


def plain_datetime(value: Any) -> datetime | None:
    """A plain datetime: Firestore's DatetimeWithNanoseconds subclass is not serialisable by
    the plotting library, an ISO string is parsed."""
    if value is None:
        return None
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def attempts(records: Mapping[str, Iterable[Mapping[str, Any]]], now: datetime) -> list[Attempt]:
    """Pod records by layer key -> the attempts that started, oldest first (an attempt still
    running ends at `now`, one that ended with no end time recorded at its start; one that
    never started is not on the timeline)."""
    out: list[Attempt] = []
    for key, docs in records.items():
        for r in docs:
            start = plain_datetime(r.get("started"))
            if start is None:
                continue
            result = outcome(r)
            # A pod that ended without an end time (pod GC removed it with its lost node, so
            # no kubelet wrote it) is drawn as a point, not as running until now.
            end = plain_datetime(r.get("finished")) or (now if result == "running" else start)
            out.append(
                Attempt(
                    key,
                    int(r.get("index", 0)),
                    str(r.get("name", "")),
                    start,
                    max(start, end),
                    result,
                    r.get("exit_code"),
                    r.get("reason"),
                )
            )
    return sorted(out, key=lambda a: (a.start, a.layer, a.index))


def running_pods(items: list[Attempt]) -> list[tuple[datetime, int]]:
    """The step function of pods running: (time, count from then on), one point for each
    time an attempt starts or ends."""
    deltas: dict[datetime, int] = {}
    for a in items:
        deltas[a.start] = deltas.get(a.start, 0) + 1
        deltas[a.end] = deltas.get(a.end, 0) - 1
    out, level = [], 0
    for t in sorted(deltas):
        level += deltas[t]
        out.append((t, level))
    return out


def ramp_allowed(
    run: RunState,
    ramps: Mapping[str, Ramp],
    completions: Mapping[str, int],
    times: Iterable[datetime],
    now: datetime,
) -> list[tuple[datetime, int]]:
    """What the ramps allowed at each time: the sum of the running layers' ramp targets
    (an operator's `scale` override counts instead of its layer's ramp).

    A layer runs from its submission to its end. A busy Bigtable's gate re-anchors a ramp's
    start when it holds or lowers it (docs/bigtable-ramp-and-bill.md), and the run keeps only
    the last anchor: from there on the ramp is the re-anchored one, before it the ramp from
    the submission (the gate's earlier holds are not stored)."""
    out = []
    for t in times:
        total = 0
        for ls in run.layers.values():
            anchored = ls.timing.ramp_started_at
            began = ls.timing.submitted_at or anchored
            if began is None or t < began or t > (ls.timing.finished_at or now):
                continue
            start = anchored if anchored is not None and t >= anchored else began
            total += parallelism_target(
                ramps[ls.stage], completions.get(ls.key, 1), start, t,
                override=ls.job.scale_override,
            )  # fmt: skip
        out.append((t, total))
    return out


def batch_chunk_count(index: int, size: LayerSize) -> int:
    """Chunks of one batch: the batch size, or fewer for the last batch."""
    return max(0, min(size.batch_size, size.chunks - index * size.batch_size))


def chunks_over_time(
    items: list[Attempt], sizes: Mapping[str, LayerSize]
) -> dict[str, list[tuple[datetime, int]]]:
    """Per layer: (time, cumulative chunks done) at each index's first success."""
    firsts: dict[tuple[str, int], datetime] = {}
    for a in items:
        if a.outcome == "succeeded":
            key = (a.layer, a.index)
            firsts[key] = min(firsts.get(key, a.end), a.end)
    out: dict[str, list[tuple[datetime, int]]] = {}
    for (layer, index), at in sorted(firsts.items(), key=lambda kv: kv[1]):
        size = sizes.get(layer)
        n = batch_chunk_count(index, size) if size else 0
        series = out.setdefault(layer, [])
        series.append((at, (series[-1][1] if series else 0) + n))
    return out
