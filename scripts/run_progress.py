"""Gathers what `pipeline status` shows: the run from Firestore, each layer's size from its
config snapshot, its cost estimate, ramp target and forecast (ETA and projected cost, computed
on read from the stored run: shared.forecast.forecast), and (best effort) the cluster's word on
running layers' pods (ready, OOM kills, nodes, requests). The arithmetic is
`shared.views.progress`; this module only reads."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import Any

from scripts.layer_target import run_config
from shared.config.config import PipelineConfig
from shared.forecast.forecast import RunForecast, run_forecast
from shared.forecast.rightsize_run import run_suggestions
from shared.jobs.layer_spec import layer_spec
from shared.model.grid import layer_batch_size
from shared.model.layers import layer_shape
from shared.model.phase import Phase
from shared.model.state import LayerState, RunState
from shared.money.costs import estimate
from shared.money.pricing import load_rates
from shared.ports.cluster import ClusterError, ClusterReader
from shared.reconcile.canary import canary_summary
from shared.reconcile.parallelism import parallelism_target
from shared.views.fleet import count_oom
from shared.views.progress import (
    LayerPods,
    LayerSize,
    RunProgress,
    cluster_totals,
    layer_progress,
    run_progress,
)

ACTIVE_PHASES = ("Running", "Pending")


def layer_size(cfg: PipelineConfig, stage: str, layer: int) -> LayerSize:
    """A layer's chunk count and per-pod batch size, from the run's config."""
    shape = layer_shape(cfg.layer2_shape(), layer)
    return LayerSize(math.prod(shape), layer_batch_size(cfg.job.for_stage(stage).batch_size, layer))


def observe_pods(cluster: ClusterReader, job_name: str) -> LayerPods:
    """Ready pods, OOM-killed attempts, nodes and requests of a running layer's Job."""
    job = cluster.get_job(job_name)
    pods = cluster.list_pods(job_name)
    active = [p for p in pods if p.phase in ACTIVE_PHASES]
    return LayerPods(
        ready=job.ready if job is not None else 0,
        oom=count_oom(p.reason for p in pods),
        nodes=frozenset(p.node for p in active if p.node),
        cpu_requested=sum(p.cpu_request for p in active),
        memory_requested_gib=sum(p.memory_request_gib for p in active),
        pods=len(active),
    )


def gather(run: RunState, now: datetime, cluster: ClusterReader | None) -> tuple[RunProgress, str]:
    """The run's progress, and a note when part of it could not be read."""
    cfg = run_config(run)
    notes: list[str] = []
    try:
        cost = estimate(cfg, run, load_rates(), now)
        by_key: dict[str, float] | None = {lc.key: lc.usd for lc in cost.layers}
        total_cost: float | None = cost.usd
        fee: float | None = cost.cluster_fee_usd
    except ValueError as e:  # a region the rate table lacks
        by_key, total_cost, fee = None, None, None
        notes.append(f"no cost estimate: {str(e).splitlines()[0]}")
    fc: RunForecast | None = None
    try:
        fc = run_forecast(cfg, run, now)
    except ValueError as e:  # the same missing rate: ETAs fall back to the average rate
        notes.append(f"no forecast: {str(e).splitlines()[0]}")
    forecasts = {lf.key: lf for lf in fc.layers} if fc is not None else {}
    rows, observed = [], []
    spot_nodes: set[str] = set()
    for ls in run.ordered_layers():
        pods = _pods_of(cluster, ls, notes)
        if pods is not None:
            observed.append(pods)
            if cfg.job.for_stage(ls.stage).spot:
                spot_nodes |= pods.nodes
        rows.append(
            layer_progress(
                run,
                ls,
                layer_size(cfg, ls.stage, ls.layer),
                now,
                ramp_target=_target(cfg, ls, now),
                cost_usd=None if by_key is None else by_key.get(ls.key, 0.0),
                pods=pods,
                forecast=forecasts.get(ls.key),
            )
        )
    totals = cluster_totals(observed, spot_nodes) if cluster is not None else None
    progress = run_progress(
        run, rows, now, cost_usd=total_cost, cluster_fee_usd=fee, cluster=totals, forecast=fc
    )
    try:
        sizes = tuple(s.to_dict() for s in run_suggestions(cfg, run))
        progress = replace(progress, rightsize=sizes, canaries=tuple(canary_summary(run)))
    except ValueError as e:  # the rate table lacks the region (noted above)
        notes.append(f"no right-size suggestions: {str(e).splitlines()[0]}")
    return progress, "; ".join(notes)


def _target(cfg: PipelineConfig, ls: LayerState, now: datetime) -> int | None:
    if ls.phase != Phase.RUNNING:
        return None
    ramp, completions = (
        cfg.job.for_stage(ls.stage).ramp,
        layer_spec(cfg, ls.stage, ls.layer).completions,
    )
    return parallelism_target(
        ramp,
        completions,
        ls.timing.ramp_started_at,
        now,
        override=ls.job.scale_override,
        current=ls.job.parallelism,
    )


def _pods_of(cluster: ClusterReader | None, ls: LayerState, notes: list[str]) -> LayerPods | None:
    if cluster is None or ls.phase != Phase.RUNNING or not ls.job.name:
        return None
    try:
        return observe_pods(cluster, ls.job.name)
    except ClusterError as e:
        notes.append(f"cluster not read for {ls.key}: {str(e).splitlines()[0][:80]}")
        return None


def as_json(progress: RunProgress) -> dict[str, Any]:
    """`--json`: every field, layers keyed as in Firestore."""
    from dataclasses import asdict

    doc = asdict(progress)
    for row, lp in zip(doc["layers"], progress.layers, strict=True):
        row["key"] = lp.key
    return doc
