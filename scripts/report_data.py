"""Reads what `pipeline report` draws: the run, its pod records (every attempt) and alerts
from Firestore, priced and laid on a timeline by the pure `shared.views.run_timeline`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scripts.bill_read import bill_facts, default_monitor, run_bill
from scripts.cost_report import cost_report
from scripts.layer_target import batch_chunks, layer_geometry, run_config
from scripts.money_format import usd
from scripts.run_progress import layer_size
from shared.forecast.rightsize_run import run_suggestions
from shared.jobs.layer_spec import layer_spec
from shared.model import intervals
from shared.model.state import RunState
from shared.reconcile.canary import canary_summary
from shared.views.build_timeline import BuildTimeline, build_timeline
from shared.views.progress import LayerSize
from shared.views.run_timeline import (
    Attempt,
    attempts,
    chunks_over_time,
    ramp_allowed,
    running_pods,
)

MAX_FAILED_ROWS = 200  # failed indexes listed in the report (the count is always given)


@dataclass
class FailedIndex:
    layer: str
    index: int
    chunks: int
    first_chunk: tuple[int, ...]
    attempts: int
    last_reason: str


@dataclass
class ReportData:
    run: RunState
    now: datetime
    sizes: dict[str, LayerSize]
    attempts: list[Attempt]
    running: list[tuple[datetime, int]]
    allowed: list[tuple[datetime, int]]
    chunks: dict[str, list[tuple[datetime, int]]]
    costs: dict[str, Any] | None
    failed: list[FailedIndex] = field(default_factory=list)
    failed_total: int = 0
    facts: dict[str, str] = field(default_factory=dict)
    # The run's canaries (shared.reconcile.canary.canary_summary) and right-size suggestions
    # (shared.reconcile.rightsize.Suggestion.to_dict), docs/canary-and-rightsize.md.
    canaries: list[dict[str, Any]] = field(default_factory=list)
    rightsize: list[dict[str, Any]] = field(default_factory=list)
    wall_parts: BuildTimeline | None = None  # where the wall time went (build_timeline)


def pod_records_by_layer(store: Any, run: RunState) -> dict[str, list[dict[str, Any]]]:
    """The stored pod records of every layer that was submitted, by layer key."""
    keys = [ls.key for ls in run.ordered_layers() if ls.timing.submitted_at is not None]
    return {key: store.pod_records(run.run_id, key) for key in keys}


def collect(store: Any, run: RunState, now: datetime) -> ReportData:
    """Everything the report shows, read once from the store."""
    data = build(run, pod_records_by_layer(store, run), now)
    # The whole bill among the facts (docs/bigtable-ramp-and-bill.md).
    try:
        data.facts.update(bill_facts(run_bill(run_config(run), run, now, default_monitor())))
    except ValueError:  # a region the rate table lacks: the facts say "?" for the cost already
        pass
    return data


def build(run: RunState, records: dict[str, list[dict[str, Any]]], now: datetime) -> ReportData:
    """The report's data from a run and its pod records by layer key (no I/O)."""
    cfg = run_config(run)
    items = attempts(records, now)
    sizes = {ls.key: layer_size(cfg, ls.stage, ls.layer) for ls in run.ordered_layers()}
    running = running_pods(items)
    ramps = {s: cfg.job.for_stage(s).ramp for s in run.stages}
    completions = {k: sizes[k].batches for k in sizes}
    allowed = ramp_allowed(run, ramps, completions, [t for t, _ in running], now)
    try:
        costs: dict[str, Any] | None = cost_report(run, now)
    except ValueError:
        costs = None
    failed, total = [], 0
    for ls in run.ordered_layers():
        indexes = intervals.parse(ls.progress.failed_indexes)
        total += len(indexes)
        if not indexes:
            continue
        geometry = layer_geometry(cfg, ls.stage, ls.layer)
        for index in indexes[: max(0, MAX_FAILED_ROWS - len(failed))]:
            mine = [a for a in items if a.layer == ls.key and a.index == index]
            last = mine[-1] if mine else None
            reason = "" if last is None else f"{last.outcome} {last.reason or ''} "
            reason += "" if last is None or last.exit_code is None else f"exit {last.exit_code}"
            failed.append(
                FailedIndex(
                    ls.key,
                    index,
                    len(batch_chunks(index, *geometry)),
                    batch_chunks(index, *geometry)[0],
                    len(mine),
                    reason.strip(),
                )
            )
    data = ReportData(run, now, sizes, items, running, allowed, chunks_over_time(items, sizes),
                      costs, failed, total)  # fmt: skip
    data.facts = facts(data, cfg)
    data.wall_parts = build_timeline(run, records, now)
    data.canaries = canary_summary(run)
    try:
        data.rightsize = [s.to_dict() for s in run_suggestions(cfg, run)]
    except ValueError:  # a region the rate table lacks (the costs say so too)
        data.rightsize = []
    return data


def facts(data: ReportData, cfg: Any) -> dict[str, str]:
    """The header: what the run was, how long it took, what it cost."""
    run = data.run
    end = run.finished_at or data.now
    wall = (end - run.created_at).total_seconds() if run.created_at else 0.0
    outcomes: dict[str, int] = {}
    for a in data.attempts:
        outcomes[a.outcome] = outcomes.get(a.outcome, 0) + 1
    peak = max((n for _, n in data.running), default=0)
    plan = {ls.key: layer_spec(cfg, ls.stage, ls.layer).requests for ls in run.ordered_layers()}
    return {
        "run": run.run_id,
        "graph": run.graph_id,
        "status": run.status,
        "stages": ", ".join(run.stages),
        "advance": run.advance,
        "created": f"{run.created_at:%Y-%m-%d %H:%M:%S} UTC" if run.created_at else "",
        "wall time": f"{wall / 60:.1f} min",
        "layers": str(len(run.layers)),
        "chunks (all layers)": str(sum(s.chunks for s in data.sizes.values())),
        "pod attempts": ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())) or "none",
        "peak pods running": str(peak),
        "requests per pod": ", ".join(
            sorted({f"{p.cpu:g} vCPU / {p.memory_gib:g} GiB" for p in plan.values()})
        ),
        "cost (estimate)": "?" if data.costs is None else f"${usd(data.costs['total_usd'])}",
        "budget": f"${run.budget_usd:g}" if run.budget_usd else "none",
        "region": cfg.region,
        "failed indexes": str(data.failed_total),
    }
