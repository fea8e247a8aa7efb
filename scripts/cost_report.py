"""A run's estimated cost by layer and stage, as rows (`pipeline costs`, `run`, the report):
priced now from the rate table for the run's region (Autopilot bills requests x runtime)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from scripts.layer_target import run_config
from shared.config.config import PipelineConfig
from shared.jobs.setup_job import setup_requests
from shared.model.state import LayerState, RunState, SetupState
from shared.money.costs import LayerCost, estimate
from shared.money.pricing import load_rates

SETUP = "setup"  # a setup pass's "layer" in rows and tables (`pipeline submit` takes 0)


def _setup_row(
    cfg: PipelineConfig, setup: SetupState, lc: LayerCost, now: datetime
) -> dict[str, Any]:
    """A setup pass's row: one pod at the setup's requests over its Jobs' spans."""
    req = setup_requests(cfg.job.for_stage(setup.stage).compute_class)
    hours = setup.span_s(now) / 3600
    return {
        "stage": setup.stage,
        "layer": SETUP,
        "key": lc.key,
        "phase": setup.phase,
        "pods": setup.attempt + 1,
        "retries": setup.attempt,
        "preempted": 0,
        "vcpu_hours": req.cpu * hours,
        "gib_hours": req.memory_gib * hours,
        "usd": lc.usd,
        "backfilled_pods": 0,
    }


def _layer_row(ls: LayerState, lc: LayerCost) -> dict[str, Any]:
    return {
        "stage": ls.stage,
        "layer": ls.layer,
        "key": ls.key,
        "phase": ls.phase,
        "pods": ls.pods.succeeded + ls.pods.failed + ls.pods.preempted,
        "retries": ls.pods.failed,
        "preempted": ls.pods.preempted,
        "vcpu_hours": (ls.pods.cpu_seconds + ls.pods.running_cpu_seconds) / 3600,
        "gib_hours": (ls.pods.memory_gib_seconds + ls.pods.running_memory_gib_seconds) / 3600,
        "usd": lc.usd,
        "backfilled_pods": lc.backfilled_pods,
    }


def cost_report(run: RunState, now: datetime) -> dict[str, Any]:
    """A run's estimated cost by layer and stage, the cluster fee and the total (JSON-ready).
    Rows in build order: each stage's setup pass (`"layer": "setup"`) before its layers;
    passes never started spent nothing and have no row."""
    cfg = run_config(run)
    est = estimate(cfg, run, load_rates(), now)
    by_key = {lc.key: lc for lc in est.layers}
    layers: list[dict[str, Any]] = []
    for stage in run.stages:
        setup = run.setups.get(stage)
        if setup is not None and f"{stage}-{SETUP}" in by_key:
            layers.append(_setup_row(cfg, setup, by_key[f"{stage}-{SETUP}"], now))
        for ls in (ls for ls in run.ordered_layers() if ls.stage == stage):
            if ls.key in by_key:
                layers.append(_layer_row(ls, by_key[ls.key]))
    stages: dict[str, float] = {}
    for row in layers:
        stages[row["stage"]] = stages.get(row["stage"], 0.0) + row["usd"]
    models = {s: ("Spot" if cfg.job.for_stage(s).spot else "on-demand") for s in run.stages}
    classes = {s: cfg.job.for_stage(s).compute_class or "general-purpose" for s in run.stages}
    return {
        "run_id": run.run_id,
        "graph_id": run.graph_id,
        "status": run.status,
        "estimate": True,
        "region": cfg.region,
        "priced_at": now.isoformat(),
        "provisioning": models,
        "compute_class": classes,
        "layers": layers,
        "stages": stages,
        "cluster_fee_usd": est.cluster_fee_usd,
        "total_usd": est.usd,
    }
