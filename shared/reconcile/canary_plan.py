"""The canary's plan for a layer, from the run's config (shared.reconcile.canary): its Job, rendered
from the layer's own, its size and margin. Pure."""

from __future__ import annotations

import math
from dataclasses import replace

from shared.config.config import PipelineConfig
from shared.model.layers import layer_shape
from shared.model.phase import Phase
from shared.model.stages import FIRST_LAYER
from shared.model.state import LayerState
from shared.reconcile.canary import (
    CanaryPlan,
    canary_job_name,
    canary_manifest,
    canary_size,
)
from shared.reconcile.decision import LayerPlan


def with_canary(
    cfg: PipelineConfig,
    ls: LayerState,
    lp: LayerPlan,
) -> LayerPlan:
    """`lp` with its canary's plan when the config asks for one (controller.canary_chunks)
    and the layer is a stage's layer 2 still to be built whose canary has not ended."""
    wanted = cfg.controller.canary_chunks
    if (
        not wanted
        or ls.layer != FIRST_LAYER
        or ls.done_before
        or ls.phase != Phase.WAITING
        or ls.canary.phase in (Phase.SUCCEEDED, Phase.FAILED)
    ):
        return lp
    name = ls.canary.job or canary_job_name(lp.job_name)
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
    )
    return replace(lp, canary=plan)
