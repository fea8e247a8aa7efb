"""A run's right-size suggestions from its stored state and config snapshot, as `pipeline
status`, `pipeline run`, the report and the demo show them (shared.reconcile.rightsize decides; this
module only gathers its inputs, with the forecast's per-layer plans). Pure apart from reading the
packaged rate table. The sizes `job.rightsize: auto` applies are the decision's
(shared.reconcile.run_sizes)."""

from __future__ import annotations

from shared.config.config import PipelineConfig
from shared.forecast.forecast import forecast_inputs
from shared.jobs.autopilot import Requests
from shared.model.state import RunState
from shared.reconcile.rightsize import Suggestion, suggest
from shared.reconcile.run_sizes import rightsized


def run_suggestions(cfg: PipelineConfig, run: RunState) -> list[Suggestion]:
    """Suggestions for the run's layers, [] when every stage has `job.rightsize: off`."""
    stages = [s for s in run.stages if cfg.job.for_stage(s).rightsize != "off"]
    if not stages:
        return []
    plans, _, rates = forecast_inputs(cfg, run)
    requested = {
        k: Requests(p.cpu, p.memory_gib) for k, p in plans.items() if p.cpu and p.memory_gib
    }
    margins = {s: cfg.job.for_stage(s).rightsize_margin for s in run.stages}
    classes = {s: cfg.job.for_stage(s).compute_class for s in run.stages}
    layers = [ls for ls in run.ordered_layers() if ls.stage in stages]
    applied = {f"{s}-L{layer}": r for (s, layer), r in rightsized(cfg, run).items()}
    return suggest(layers, requested, margins, rates, classes, applied)


def savings_usd(suggestions: list[Suggestion]) -> float:
    """What the suggestions would have saved over the layers that ran (their pod-seconds)."""
    return sum(s.savings_usd for s in suggestions if s.savings_usd is not None)
