"""A run from its config: the fresh run state, and the plan the controller reconciles it by.

`new_run` lays out every layer of the requested stages (`shared.model.stages`), all waiting.
`plan_for` says, for each layer of a run, what the config makes of it: size, ramp, requests
(`shared.jobs.layer_spec`), and the Job of its current attempt, name and rendered manifest
(`shared.jobs.manifest`), or why the config cannot render one. Pure module.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.config.config import PipelineConfig
from shared.config.stage_selection import check_stages, runs_pcg_ingest_setup, top_layer
from shared.jobs.autopilot import ResourceLimitError
from shared.jobs.layer_spec import LayerRangeError, attempt_salt, job_name, layer_spec
from shared.jobs.manifest import ManifestError, render_job
from shared.jobs.setup_job import (
    dataset_config_map_manifest,
    has_setup,
    probes_graph,
    render_setup_job,
    setup_job_name,
)
from shared.jobs.worker_pod import layer_processes
from shared.model.layers import layer_count
from shared.model.phase import Phase, RunStatus
from shared.model.state import LayerState, RunState, SetupState, build_layers
from shared.money.costs import billing_for
from shared.ports.graph_table import GraphTable
from shared.reconcile.canary_plan import with_canary
from shared.reconcile.decision import LayerPlan, Plan, SetupPlan
from shared.reconcile.root_check import runs_root_check

# The parallelism a planned manifest is rendered with; `manifest.for_create` writes the
# decision's value into it when the Job is created.
_PLANNED_PARALLELISM = 1


def layer_plan(cfg: PipelineConfig, run_id: str, ls: LayerState, render: bool) -> LayerPlan:
    """The plan of one layer of run `run_id`: its Job is the one of the layer's attempt,
    rendered if `render` (else only named)."""
    settings = cfg.job.for_stage(ls.stage)
    ramp, evictions = settings.ramp, settings.max_evictions_per_index
    name = job_name(cfg.graph_id, ls.stage, ls.layer, attempt_salt(run_id, ls.job.attempt))
    manifest: dict[str, Any] | None = None
    refusal = ""
    try:
        if render:
            manifest = render_job(
                cfg,
                ls.stage,
                ls.layer,
                run_id=run_id,
                parallelism=_PLANNED_PARALLELISM,
                attempt=ls.job.attempt,
            )
    except ManifestError as e:
        refusal = str(e)
    try:
        spec = layer_spec(cfg, ls.stage, ls.layer)
    except (LayerRangeError, ResourceLimitError):
        # No Job can run this layer under this config (the refusal says why): it fails
        # when it is started, like any other refused manifest.
        return LayerPlan(1, ramp, job_name=name, refusal=refusal, max_evictions_per_index=evictions)
    req = spec.requests
    return LayerPlan(
        spec.completions,
        ramp,
        req.cpu,
        req.memory_gib,
        name,
        manifest,
        refusal,
        batch_chunks=min(spec.batch_size, spec.chunks),
        max_evictions_per_index=evictions,
        processes=layer_processes(settings, req),
        processes_per_vcpu=settings.processes_per_vcpu,
        root_check=runs_root_check(cfg, ls.stage, ls.layer),
    )


def setup_plan(
    cfg: PipelineConfig, run_id: str, setup: SetupState, table: GraphTable | None = None
) -> SetupPlan:
    """The plan of a stage's setup pass: its Job (rendered while it may be created; an
    image's ingest setup with `--exist-ok` when the observed `table` holds the graph's
    metadata), the grid its graph metadata must agree with, and the table it must leave
    that metadata in."""
    name = setup_job_name(cfg.graph_id, setup.stage, run_id, setup.attempt)
    grid = cfg.layer2_shape()
    layers = layer_count(grid, cfg.ds.graph_config.FANOUT)
    where = {
        "table_id": cfg.graph_id,
        "project": cfg.bigtable.project,
        "instance": cfg.bigtable.instance,
        "pcg_ingest": runs_pcg_ingest_setup(cfg, setup.stage),
        "probes_graph": probes_graph(cfg, setup.stage),
        "fanout": cfg.ds.graph_config.FANOUT,
    }
    if setup.phase not in (Phase.WAITING, Phase.RUNNING):
        return SetupPlan(name, layer2_shape=grid, layer_count=layers, **where)
    exist_ok = table is not None and table.has_metadata
    try:
        manifest = render_setup_job(
            cfg, setup.stage, run_id=run_id, attempt=setup.attempt, exist_ok=exist_ok
        )
    except ManifestError as e:
        return SetupPlan(name, refusal=str(e), layer2_shape=grid, layer_count=layers, **where)
    config_map = dataset_config_map_manifest(cfg, run_id)
    return SetupPlan(
        name, manifest, layer2_shape=grid, layer_count=layers, config_map=config_map, **where
    )


def may_create(ls: LayerState) -> bool:
    """Whether a reconcile may create the layer's Job: it is waiting, or running (its Job may
    have to be re-created). A finished layer never gets a Job again (a re-submit makes it
    waiting first)."""
    return ls.phase in (Phase.WAITING, Phase.RUNNING)


def plan_for(
    cfg: PipelineConfig,
    run: RunState,
    table: GraphTable | None = None,
) -> Plan:
    """The plan of every layer of a run, with the controller settings and billing. Only the
    layers a reconcile may create get a rendered manifest (rendering is the costly part).
    `table`: the graph's table as observed for its setup passes (None: not read)."""
    return Plan(
        layers={
            key: with_canary(cfg, ls, layer_plan(cfg, run.run_id, ls, may_create(ls)))
            for key, ls in run.layers.items()
        },
        stall_after_s=cfg.controller.stall_after_s,
        billing=billing_for(cfg, run.stages),
        max_vcpus=cfg.controller.max_vcpus,
        bigtable_cpu_max=cfg.controller.bigtable_cpu_max,
        setups={s: setup_plan(cfg, run.run_id, st, table) for s, st in run.setups.items()},
    )


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
        status=RunStatus.RUNNING,
        created_at=now,
        budget_usd=budget_usd if budget_usd is not None else cfg.controller.budget_usd,
        config=snapshot,
        dataset=cfg.ds.model_dump(mode="json"),
        layers=build_layers(stages, tops),
        setups={s: SetupState(stage=s) for s in stages if has_setup(cfg, s)},
    )
