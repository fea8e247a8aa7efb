"""The requests a run's measurements give its layers: each stage's layer 2 from its canary
(shared.reconcile.canary), the layers above right-sized where `job.rightsize: auto`
(shared.reconcile.rightsize). A function of the run's state and config, so the observe step
(shared.control.observe), the decision's config history (shared.reconcile.rightsize_version) and
the suggestions (shared.forecast.rightsize_run) agree. Pure module."""

from __future__ import annotations

from shared.config.config import PipelineConfig
from shared.jobs.autopilot import Requests
from shared.model.state import RunState
from shared.reconcile.canary import with_canary_sizes, with_layer_requests
from shared.reconcile.rightsize import rightsized_layers


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
