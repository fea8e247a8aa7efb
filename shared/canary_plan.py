"""The canary's plan for a layer, from the run's config (shared.canary): its Job, rendered
from the layer's own, its size, margin and forecaster. Pure."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from functools import partial

from shared.autopilot import Requests
from shared.canary import CanaryFigures, CanaryPlan, canary_job_name, canary_manifest, canary_size
from shared.canary_forecast import forecast_build
from shared.config import PipelineConfig
from shared.decision import LayerPlan
from shared.layers import layer_shape
from shared.stages import FIRST_LAYER
from shared.state import LayerState, RunState


def _forecaster(
    cfg: PipelineConfig,
    run: RunState,
    ls: LayerState,
    figures: CanaryFigures,
    planned: Requests,
    sized: Requests,
    now: datetime,
) -> dict[str, float]:
    return forecast_build(cfg, run, ls.stage, ls.layer, figures, planned, sized, now)


def with_canary(cfg: PipelineConfig, run: RunState, ls: LayerState, lp: LayerPlan) -> LayerPlan:
    """`lp` with its canary's plan when the config asks for one (controller.canary_chunks)
    and the layer is a stage's layer 2 still to be built whose canary has not ended."""
    wanted = cfg.controller.canary_chunks
    if (
        not wanted
        or ls.layer != FIRST_LAYER
        or ls.done_before
        or ls.phase != "waiting"
        or ls.canary_phase in ("done", "failed")
    ):
        return lp
    name = ls.canary_job or canary_job_name(lp.job_name)
    chunks = canary_size(wanted, math.prod(layer_shape(cfg.layer2_shape(), ls.layer)))
    job = cfg.job.for_stage(ls.stage)
    manifest = canary_manifest(lp.manifest, name, chunks) if lp.manifest is not None else None
    plan = CanaryPlan(
        job_name=name,
        chunks=chunks,
        margin=job.canary_margin,
        job=job,
        manifest=manifest,
        refusal=lp.refusal,
        forecaster=partial(_forecaster, cfg, run, ls),
    )
    return replace(lp, canary=plan)
