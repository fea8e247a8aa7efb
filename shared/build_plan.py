"""The build DAG of a run, from its config: stages, their layers, and each layer's size.

Ingest runs layer 2 to the root; meshing (if the dataset has `mesh_config`) from layer 2 to
`mesh_config.max_layer` or the root; l2cache (if `l2cache_config`) is a single layer-2 pass;
the migration is two passes over every layer, cleanup first. Pure module.
"""

from __future__ import annotations

from datetime import datetime

from shared.autopilot import layer_requests
from shared.config import PipelineConfig
from shared.grid import layer_batch_size, num_batches
from shared.layers import layer_count, layer_shape
from shared.reconcile import LayerPlan
from shared.state import STAGE_DEPENDENCIES, RunState, build_layers


class PlanError(ValueError):
    """The requested stages do not fit the config (the message names the fix)."""


def default_stages(cfg: PipelineConfig) -> list[str]:
    """The build DAG the dataset configures: ingest, then meshing and l2cache."""
    stages = ["ingest"]
    if cfg.ds.mesh_config is not None:
        stages.append("meshing")
    if cfg.ds.l2cache_config is not None:
        stages.append("l2cache")
    return stages


def check_stages(cfg: PipelineConfig, stages: list[str]) -> list[str]:
    """Validate a requested stage list; returns it in DAG order."""
    for stage in stages:
        if stage not in STAGE_DEPENDENCIES:
            raise PlanError(f"unknown stage {stage!r}: expected {', '.join(STAGE_DEPENDENCIES)}")
    if "meshing" in stages and cfg.ds.mesh_config is None:
        raise PlanError("stage meshing needs a mesh_config block in the dataset file")
    if "l2cache" in stages and cfg.ds.l2cache_config is None:
        raise PlanError("stage l2cache needs an l2cache_config block in the dataset file")
    order = list(STAGE_DEPENDENCIES)
    return sorted(dict.fromkeys(stages), key=order.index)


def top_layer(cfg: PipelineConfig, stage: str) -> int:
    """The last layer a stage builds."""
    root = layer_count(cfg.layer2_shape())
    if stage == "l2cache":
        return 2
    if stage == "meshing" and cfg.ds.mesh_config and cfg.ds.mesh_config.max_layer:
        top = cfg.ds.mesh_config.max_layer
        if top > root:
            raise PlanError(
                f"dataset mesh_config.max_layer: {top} is past the root; valid 2..{root}"
            )
        return top
    return root


def layer_plan(cfg: PipelineConfig, stage: str, layer: int) -> LayerPlan:
    """Number of batches (Job completions), ramp and per-pod requests of one layer."""
    job = cfg.job.for_stage(stage)
    shape = layer_shape(cfg.layer2_shape(), layer)
    req = layer_requests(job, layer)
    completions = num_batches(shape, layer_batch_size(job.batch_size, layer))
    return LayerPlan(completions, job.ramp, req.cpu, req.memory_gib)


def plans_for(cfg: PipelineConfig, run: RunState) -> dict[str, LayerPlan]:
    return {key: layer_plan(cfg, ls.stage, ls.layer) for key, ls in run.layers.items()}


def new_run(
    cfg: PipelineConfig,
    run_id: str,
    stages: list[str],
    advance: str,
    now: datetime,
    budget_usd: float | None = None,
) -> RunState:
    """A fresh run with every layer waiting."""
    stages = check_stages(cfg, stages)
    tops = {s: top_layer(cfg, s) for s in stages}
    snapshot = cfg.model_dump(mode="json", exclude={"dataset_config"})
    return RunState(
        run_id=run_id,
        graph_id=cfg.graph_id,
        stages=stages,
        top_layers=tops,
        advance=advance,
        status="running",
        created_at=now,
        budget_usd=budget_usd if budget_usd is not None else cfg.controller.budget_usd,
        config=snapshot,
        dataset=cfg.ds.model_dump(mode="json"),
        layers=build_layers(stages, tops),
    )
