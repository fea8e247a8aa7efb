"""A build's timeline: where each layer's wall time went, and the sums over the run.

For each layer, in build order, from the run record and its stored pod records
(`shared.reconcile.pod_accounting.PodRecord` docs):

- `approval_wait`: its dependencies met (`RunState.ready_since`) -> the operator's approval
  (only when the run waits for approvals and the approval came later);
- `advance`: eligible (ready, and approved where needed) -> its Job created;
- `startup`: Job created -> its first pod running (the Job controller creating pods, the
  scheduler, the node starting the container);
- `process_start`: that pod running -> its first chunk begun (the interpreter, imports,
  clients, the graph's metadata: the start-up of the first pod to succeed, as its worker
  reported it, `Timing.process_start_s`; none for an image's harness, which reports none);
- `compute`: the first chunk begun (the first pod running, without a process start-up) ->
  the tail's start;
- `tail`: the later of the first pod done and the last pod started (from then on no index is
  left to begin: a slot that frees stays idle) -> the last pod done;
- `completion`: the last pod done -> the Job complete (the Job controller's status update);

and for a stage's setup pass, `advance`: the stage ready (the run created, or the stages it
needs finished) -> its Job created, and `setup`: its Job created -> finished.

Pod times come from Kubernetes, whose timestamps have one-second resolution: spans bounded
by a pod's start or end are whole seconds (at a demo's scale that is coarse; at a build's, it
is not). The run's wall time
(created -> finished, or now) is split among these by `shared.views.wall_parts.breakdown`
(where layers overlap, the busier part wins), so that wall time is the sum of the named
parts plus `unnamed`, the part no span names. Pure.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.model.stages import dependencies_in
from shared.model.state import LayerState, RunState
from shared.views.run_timeline import plain_datetime
from shared.views.wall_parts import Gap, Part, Span, breakdown, gaps

GAP_SHOWN_S = 0.05  # shorter unnamed gaps are rounding, not worth a line


@dataclass(frozen=True)
class LayerTimeline:
    """One layer's (or setup's) named spans, seconds since the run was created, the
    median of its pods' start-up (created -> running), for the start-up's own split, and its
    first pod's process start-up as the worker reported it (None: not reported)."""

    key: str
    spans: tuple[Span, ...]
    pods: int = 0
    pod_startup_median_s: float | None = None
    process_start_s: float | None = None

    def seconds(self, part: Part) -> float:
        """The length of this layer's `part` (0 if it has none)."""
        return sum(s.end - s.start for s in self.spans if s.part is part)


@dataclass(frozen=True)
class BuildTimeline:
    """Every layer's spans, and the run's wall time split into parts (sums to `wall_s`)."""

    wall_s: float
    layers: tuple[LayerTimeline, ...]
    parts: dict[str, float] = field(default_factory=dict)
    unnamed: tuple[Gap, ...] = ()  # where the unnamed part lies, longest first

    def to_json(self) -> dict[str, Any]:
        """What `pipeline demo --json` and `pipeline run --timeline --json` print."""
        return {
            "wall_s": round(self.wall_s, 2),
            "parts_s": {k: round(v, 2) for k, v in self.parts.items()},
            "unnamed_gaps": [g.describe() for g in self.unnamed],
            "layers": [
                {
                    "layer": lt.key,
                    "pods": lt.pods,
                    "pod_startup_median_s": lt.pod_startup_median_s,
                    "process_start_s": lt.process_start_s,
                    **{p.value: round(lt.seconds(p), 2) for p in Part if lt.seconds(p)},
                }
                for lt in self.layers
            ],
        }


def _span(key: str, part: Part, t0: datetime, a: datetime | None, b: datetime | None) -> list:
    if a is None or b is None or b <= a:
        return []
    return [Span(key, part, (a - t0).total_seconds(), (b - t0).total_seconds())]


def _stage_ready(run: RunState, stage: str) -> datetime | None:
    """When a stage's setup could start: the run created, or the stages it needs finished."""
    deps = dependencies_in(stage, run.stages)
    if not deps:
        return run.created_at
    stamps = [run.top_layer(d).timing.finished_at for d in deps]
    return None if None in stamps else max(t for t in stamps if t)


def layer_timeline(
    run: RunState, ls: LayerState, records: Iterable[Mapping[str, Any]], t0: datetime
) -> LayerTimeline:
    """One layer's spans (see the module docstring) from its pod records."""
    pods = list(records)
    started = [s for r in pods if (s := plain_datetime(r.get("started")))]
    finished = [f for r in pods if (f := plain_datetime(r.get("finished")))]
    succeeded = [r for r in pods if r.get("phase") == "Succeeded"]
    done = [f for r in succeeded if (f := plain_datetime(r.get("finished")))]
    ready = run.ready_since(ls)
    approved = ls.approval.at if run.advance != "auto" else None
    eligible = max(t for t in (ready, approved) if t) if (ready or approved) else None
    submitted, job_done = ls.timing.submitted_at, ls.timing.finished_at
    first_run = min(started) if started else None
    last_done = max(finished) if finished else None
    tail_from = max(min(done), max(started)) if done and started else None
    computing = first_run
    if first_run is not None and ls.timing.process_start_s is not None:
        computing = first_run + timedelta(seconds=ls.timing.process_start_s)
        if (end := tail_from or last_done) is not None:
            computing = min(computing, end)
    spans = [
        *_span(ls.key, Part.APPROVAL_WAIT, t0, ready, approved),
        *_span(ls.key, Part.ADVANCE, t0, eligible, submitted),
        *_span(ls.key, Part.STARTUP, t0, submitted, first_run),
        *_span(ls.key, Part.PROCESS_START, t0, first_run, computing),
        *_span(ls.key, Part.COMPUTE, t0, computing, tail_from or last_done),
        *_span(ls.key, Part.TAIL, t0, tail_from, last_done),
        *_span(ls.key, Part.COMPLETION, t0, last_done, job_done),
    ]
    startups = [
        (s - c).total_seconds()
        for r in pods
        if (c := plain_datetime(r.get("created"))) and (s := plain_datetime(r.get("started")))
    ]
    median = statistics.median(startups) if startups else None
    return LayerTimeline(ls.key, tuple(spans), len(pods), median, ls.timing.process_start_s)


def build_timeline(
    run: RunState, records: Mapping[str, Iterable[Mapping[str, Any]]], now: datetime
) -> BuildTimeline:
    """The run's timeline: `records` are the stored pod records by layer key; a run still
    going is measured to `now`."""
    t0 = run.created_at or now
    wall = ((run.finished_at or now) - t0).total_seconds()
    layers: list[LayerTimeline] = []
    for stage, setup in run.setups.items():
        key = f"{stage}-setup"
        spans = [
            *_span(key, Part.ADVANCE, t0, _stage_ready(run, stage), setup.started_at),
            *_span(key, Part.SETUP, t0, setup.started_at, setup.finished_at),
        ]
        layers.append(LayerTimeline(key, tuple(spans)))
    for ls in run.ordered_layers():
        if ls.done_before or ls.timing.submitted_at is None:
            continue  # built by an earlier run, or never started
        layers.append(layer_timeline(run, ls, records.get(ls.key, ()), t0))
    spans = [s for lt in layers for s in lt.spans]
    parts = breakdown(spans, max(wall, 0.0))
    holes = sorted(gaps(spans, max(wall, 0.0), GAP_SHOWN_S), key=lambda g: g.start - g.end)
    return BuildTimeline(max(wall, 0.0), tuple(layers), parts, tuple(holes))
