"""A run's right-size suggestions from its stored state and config snapshot, as `pipeline
status`, `pipeline run`, the report and the demo show them (shared.reconcile.rightsize decides; this
module only gathers its inputs). Pure apart from reading the packaged rate table."""

from __future__ import annotations

from shared.config.config import PipelineConfig
from shared.forecast.forecast import forecast_inputs
from shared.jobs.autopilot import Requests
from shared.model.state import RunState
from shared.reconcile.canary import with_canary_sizes, with_layer_requests
from shared.reconcile.rightsize import Suggestion, rightsized_layers, suggest


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


def rightsized(cfg: PipelineConfig, run: RunState) -> dict[tuple[str, int], Requests]:
    """The requests `job.rightsize: auto` gives the run's layers, by (stage, layer); fields
    pinned in `job.resources.overrides` keep the config's value."""
    out: dict[tuple[str, int], Requests] = {}
    for stage in run.stages:
        job = cfg.job.for_stage(stage)
        if job.rightsize != "auto":
            continue
        layers = [ls for ls in run.ordered_layers() if ls.stage == stage]
        sizes = rightsized_layers(layers, job.rightsize_margin, job.compute_class)
        for layer, req in sizes.items():
            pin = job.resources.overrides.get(layer)
            if pin is not None:
                req = Requests(
                    pin.cpu if pin.cpu is not None else req.cpu,
                    pin.memory if pin.memory is not None else req.memory_gib,
                )
            out[(stage, layer)] = req
    return out


def with_run_sizes(cfg: PipelineConfig, run: RunState) -> PipelineConfig:
    """`cfg` with the requests the run measured for its layers: each stage's layer 2 from its
    canary (shared.reconcile.canary), the layers above right-sized (`job.rightsize: auto`). The OOM
    bump (shared.reconcile.oom) applies on top."""
    cfg = with_canary_sizes(cfg, run)
    sizes = rightsized(cfg, run)
    if not sizes:
        return cfg
    return with_layer_requests(cfg, {k: (r.cpu, r.memory_gib) for k, r in sizes.items()})
