"""Runs, plans and Job statuses for the pure decision tests of steering (OOM kills, the vCPU
cap, config versions)."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.config.config import Ramp
from shared.model.state import LayerState, RunState, build_layers
from shared.ports.cluster import JobStatus
from shared.reconcile.decision import LayerPlan, Plan

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RAMP = Ramp(start=2, factor=2, period=60, max=16)


def make_run(advance: str = "auto", stages=("ingest",), tops=None) -> RunState:
    """A running run of `stages` (4 layers each by default), every layer waiting."""
    tops = tops or {s: 4 for s in stages}
    return RunState("r1", "g", list(stages), tops, advance, layers=build_layers(list(stages), tops))


def name_for(ls: LayerState) -> str:
    return f"job-{ls.stage}-{ls.layer}-{ls.job.attempt}"


def plans(run: RunState, completions: int = 10) -> Plan:
    """Every layer: `completions` indexes, RAMP, named by name_for."""
    return Plan(
        {k: LayerPlan(completions, RAMP, job_name=name_for(ls)) for k, ls in run.layers.items()}
    )


def job(name: str, **kw) -> JobStatus:
    """A running Job status (10 indexes, parallelism 2 unless given)."""
    base = dict(
        name=name, labels={}, annotations={}, completions=10, parallelism=2, suspended=False
    )
    return JobStatus(**{**base, **kw})
