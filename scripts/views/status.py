"""Renders a run's progress: one row per layer (the DAG in build order)."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.table import Table

from shared import intervals
from shared.state import RunState

COLUMNS = ("stage", "layer", "phase", "done", "%", "active", "failed", "par", "approved", "elapsed")
PHASE_STYLE = {"succeeded": "green", "running": "cyan", "failed": "red", "waiting": "dim"}


def _elapsed(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return ""
    seconds = ((end or datetime.now(UTC)) - start).total_seconds()
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.1f}m"


def run_table(run: RunState) -> Table:
    """Per-layer table: done, %, active, failed, parallelism, approval, elapsed."""
    title = f"run {run.run_id} · graph {run.graph_id} · {run.status} · advance {run.advance}"
    table = Table(title=title, title_justify="left")
    for col in COLUMNS:
        table.add_column(col, justify="right" if col not in ("stage", "phase") else "left")
    for ls in run.ordered_layers():
        done = intervals.count(ls.completed_indexes)
        total = ls.completions
        pct = f"{100 * done / total:.0f}" if total else ""
        style = PHASE_STYLE.get(ls.phase, "")
        table.add_row(
            ls.stage,
            str(ls.layer),
            f"[{style}]{ls.phase}[/]",
            f"{done}/{total}" if total else "",
            pct,
            str(ls.active) if ls.phase == "running" else "",
            str(intervals.count(ls.failed_indexes)) or "",
            str(ls.parallelism) if ls.phase == "running" else "",
            "auto" if run.advance == "auto" else ("yes" if ls.approved else "no"),
            _elapsed(ls.submitted_at, ls.finished_at),
        )
    return table
