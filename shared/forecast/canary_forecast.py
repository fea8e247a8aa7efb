"""The build's forecast from a canary: the simulator (shared.forecast.simulation), which drives the
real decision code, fed with the canary's pod runtimes and start-up waits and the layer's
canary-sized requests (docs/canary-and-rightsize.md). Pure (the rate table is packaged).

Because the simulator drives `decide`, the decision never calls it: `decide` records an ended
canary's figures and sizes, and `with_canary_forecasts` adds the forecast to that decision
before it is committed (the reconcile's one commit, as before)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from shared.config.config import PipelineConfig
from shared.forecast.simulation.cluster import ClusterParams
from shared.forecast.simulation.engine import T0, SimSettings, simulate
from shared.forecast.simulation.runtimes import Runtimes
from shared.jobs.autopilot import Requests
from shared.model.phase import Phase
from shared.model.state import RunState
from shared.money.pricing import load_rates, pod_cost, rate_for
from shared.reconcile.build_plan import new_run
from shared.reconcile.canary import CanaryFigures, canary_figures, with_layer_requests
from shared.reconcile.decision import Alert, Decision, Snapshot

POD_OVERHEAD_S = 10.0  # the simulator's start-up per pod (shared.forecast.simulation.runtimes)
START_UP_SHARE = 0.5  # at most this share of a canary pod is taken for start-up
MIN_SIGMA, MAX_SIGMA = 0.05, 1.5
Z95 = 1.645  # the 95th percentile of a standard normal
# The simulator's Job-event delivery delay: a log sink takes up to this long, and no trigger
# waits longer than half a tick (the tick reconciles too).
SINK_DELAY_S = 20.0


def chunk_runtime(figures: CanaryFigures) -> tuple[float, float, float]:
    """(per-chunk seconds, lognormal sigma, per-pod start-up seconds) from a canary.

    Where the worker's log reports a pod's chunks apart (`pod_overhead_p50_s`: the pods of
    two chunks timed their second), a chunk takes the warm chunk time and the pod's start-up
    is what the pod paid beyond its chunks. Else, from older or one-chunk logs, the chunk is
    the worker's chunk time and the rest of the pod its start-up (the first chunk's cold part
    then counts as chunk time). Else, with no log, the pod less the simulator's start-up (at
    most half a pod), over its chunks. Sigma from p95/p50."""
    pod = max(figures.runtime_p50_s, 1e-3)
    per_pod = max(1, round(figures.chunks / figures.pods)) if figures.pods else 1
    if figures.chunk_p50_s is not None and figures.chunk_p95_s is not None:
        chunk = min(max(figures.chunk_p50_s, 1e-3), pod / per_pod)
        sigma = _sigma(max(figures.chunk_p95_s, chunk) / chunk)
        if figures.pod_overhead_p50_s is not None:
            return chunk, sigma, figures.pod_overhead_p50_s
        return chunk, sigma, pod - chunk * per_pod
    overhead = min(POD_OVERHEAD_S, pod * START_UP_SHARE)
    return (pod - overhead) / per_pod, _sigma(max(figures.runtime_p95_s, pod) / pod), overhead


def _wait(figures: CanaryFigures) -> float:
    """A pod's wait for its place: the canary's mean created -> started (whole seconds: the
    median of a few pods is 0 or 1 s), else its median."""
    return figures.start_mean_s if figures.start_mean_s is not None else figures.start_p50_s


def _trigger_delay(cfg: PipelineConfig, figures: CanaryFigures) -> float:
    """A finished Job -> the reconcile that sees it: what the canary measured of its own Job
    (`completion_s`: its last pod's end -> that reconcile, the Job controller's status
    update and the event's delivery included), else a log sink's delay, at most half a
    tick (the tick reconciles too)."""
    if figures.completion_s is not None:
        return figures.completion_s
    return min(SINK_DELAY_S, cfg.controller.tick_period_s / 2)


def _sigma(p95_over_p50: float) -> float:
    """A lognormal's shape from its p95 over its p50, within [MIN_SIGMA, MAX_SIGMA]."""
    return min(MAX_SIGMA, max(MIN_SIGMA, math.log(p95_over_p50) / Z95))


def forecast_build(
    cfg: PipelineConfig,
    run: RunState,
    stage: str,
    layer: int,
    figures: CanaryFigures,
    planned: Requests,
    sized: Requests,
    now: datetime,
    seed: int = 1,
) -> dict[str, float]:
    """The whole build's forecast once the canary of `stage`'s `layer` is done: the stages
    not yet complete simulated from now (advancing on their own, the layer at its `sized`
    requests, every chunk at the canary's runtime), plus the time and money spent so far.
    Keys: wall_s (from the run's start), remaining_s, pods, cost_usd."""

    controller = cfg.controller.model_copy(update={"canary_chunks": None, "advance": "auto"})
    sim_cfg = with_layer_requests(cfg, {(stage, layer): (sized.cpu, sized.memory_gib)})
    sim_cfg = sim_cfg.model_copy(update={"controller": controller})
    stages = [s for s in run.stages if not run.stage_complete(s)] or list(run.stages)
    sim_run = new_run(sim_cfg, f"{run.run_id}-forecast", stages, "auto", T0)
    sim_run.budget_usd = None
    chunk_s, sigma, overhead = chunk_runtime(figures)
    settings = SimSettings(
        cluster=ClusterParams(node_startup_s=figures.start_max_s, warm_start_s=_wait(figures)),
        runtimes=Runtimes(chunk_seconds=chunk_s, sigma=sigma, pod_overhead_s=overhead),
        sink_delay_s=_trigger_delay(cfg, figures),
        seed=seed,
    )
    report = simulate(sim_cfg, sim_run, settings)
    job = cfg.job.for_stage(stage)
    rate = rate_for(load_rates(), cfg.region, job.compute_class, job.spot)
    spent = pod_cost(rate, planned.cpu, planned.memory_gib, figures.pod_seconds)
    elapsed = max(0.0, (now - run.created_at).total_seconds()) if run.created_at else 0.0
    return {
        "wall_s": round(elapsed + report.wall_s, 2),
        "remaining_s": round(report.wall_s, 2),
        "pods": report.pods + (figures.pods or figures.chunks),
        "cost_usd": round(spent + report.cost_usd, 6),
    }


# forecast_build's signature: (cfg, run, stage, layer, figures, planned, sized, now) -> forecast.
BuildForecast = Callable[..., dict[str, float]]


def with_canary_forecasts(
    cfg: PipelineConfig,
    seen: Snapshot,
    decision: Decision,
    forecast: BuildForecast = forecast_build,
) -> Decision:
    """`decision` (decided from `seen` under `cfg`) with the build's forecast in the record of
    each canary that succeeded in it (`forecast`; `forecast_error` where it cannot price the
    run, e.g. a region the rate table lacks: no forecast, no stop), and in the
    `approval_needed` alert that carries that record. The forecast is made from the figures of
    the canary's pods as observed, the requests it ran at and the layer's sized ones, at the
    decision's time."""
    ended = [
        key
        for key, ls in decision.state.layers.items()
        if ls.canary.phase == Phase.SUCCEEDED
        and seen.run.layers[key].canary.phase != Phase.SUCCEEDED
    ]
    if not ended:
        return decision
    state = copy.deepcopy(decision.state)
    records: dict[tuple[str, int], dict] = {}
    for key in ended:
        ls = state.layers[key]
        figures = canary_figures(seen.pods.get(ls.canary.job, []), seen.canary_logs)
        if figures is None:  # a canary succeeds only with a succeeded pod
            continue
        record = ls.canary.record
        figures = replace(figures, completion_s=record.get("completion_s"))
        planned = Requests(record["planned"]["cpu"], record["planned"]["memory_gib"])
        sized = Requests(record["sized"]["cpu"], record["sized"]["memory_gib"])
        try:
            fc = forecast(cfg, seen.run, ls.stage, ls.layer, figures, planned, sized, decision.at)
            ls.canary.record = {**record, "forecast": fc}
        except ValueError as e:
            ls.canary.record = {**record, "forecast_error": str(e).splitlines()[0]}
        records[(ls.stage, ls.layer)] = ls.canary.record
    actions = [
        replace(a, details={**a.details, "canary": records[(a.stage, a.layer)]})
        if isinstance(a, Alert)
        and a.kind == "approval_needed"
        and (a.stage, a.layer) in records
        and "canary" in a.details
        else a
        for a in decision.actions
    ]
    return replace(decision, state=state, actions=actions)
