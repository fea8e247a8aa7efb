"""Forecasts: when a run will finish and what it will cost, from what it has observed. Pure.

The model is the simulator's (shared.forecast.simulation), in closed form: a layer's
remaining pods run at the ramp's parallelism (start x factor^steps every period, capped at
`max` and at the batches left), each for the mean pod runtime observed in that layer, after
its wait for a place (`pod_wait_s`: creation to start, each pod, not billed). A pod is a
fixed start-up (`pod_overhead_s`: process start, imports, clients, the first chunk's cold
part; measured by a canary, else the simulator's 10 s) plus its chunks, so before a layer
has run a pod its pods take that start-up plus the per-chunk time observed in the nearest
finished layer of the stage (that layer's pods less the start-up, over its chunks) times the
layer's batch (the run's first layer: `default_chunk_s`): a top layer of one chunk a pod
still pays the start-up. Layers of a stage follow each other; stages run once the stages
they depend on are done, in parallel with their siblings (ingest, then meshing and l2cache
side by side). Each advance adds the latency observed so far (a layer's submission after its
dependencies were done), else `advance_s` (about half a tick). Costs are pod-seconds times
requests at the layer's rate, plus the cluster fee over the remaining time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from shared.config.config import PipelineConfig, Ramp
from shared.forecast.simulation.runtimes import Runtimes
from shared.model import intervals
from shared.model.grid import layer_batch_size
from shared.model.layers import layer_shape
from shared.model.phase import Phase
from shared.model.stages import dependencies_in
from shared.model.state import LayerState, RunState
from shared.money.pricing import Rate, load_rates, pod_cost, rate_for
from shared.reconcile.build_plan import layer_plan
from shared.reconcile.canary import (
    canary_chunk_s,
    canary_completion_s,
    canary_pod_overhead_s,
    canary_pod_wait_s,
)
from shared.reconcile.decision import LayerPlan

DEFAULT_CHUNK_S = 30.0  # per chunk, before the run has finished a pod
POD_OVERHEAD_S = Runtimes.pod_overhead_s  # a pod's start-up: the simulator's
# At most this share of an observed pod is taken for start-up: pods not much longer than
# the start-up cannot tell the two apart, so they are split evenly.
START_UP_SHARE = 0.5


@dataclass(frozen=True)
class LayerForecast:
    key: str
    remaining_s: float  # from now until the layer is done (0 if done)
    finishes_in_s: float  # from now, its wait for the layers before it included
    projected_usd: float  # what its remaining pods will cost


@dataclass(frozen=True)
class RunForecast:
    remaining_s: float
    projected_usd: float
    layers: list[LayerForecast]
    # The per-chunk time assumed while no pod of the run has finished (None once one has):
    # until then the forecast is a guess and the views say so.
    assumed_chunk_s: float | None = None


def drain_seconds(
    pods: int, pod_s: float, ramp: Ramp, ramp_elapsed_s: float, in_flight: int = 0
) -> float:
    """Time to run `pods` pods of `pod_s` each under the ramp, starting `ramp_elapsed_s`
    into it: the work is spread over the ramp's parallelism step by step, then runs in
    whole waves once the ramp is capped. `in_flight` of the pods already run, started at
    different times (a layer under way): on average half done, and the pods left finish
    staggered, not in waves."""
    if pods <= 0 or pod_s <= 0:
        # Pods that take no time (observed pods shorter than Kubernetes' one-second
        # resolution) add none.
        return 0.0
    start_par = ramp.start * ramp.factor ** min(math.floor(ramp_elapsed_s / ramp.period), 64)
    in_flight = min(in_flight, pods, ramp.max, int(start_par))  # no more than run at once
    work = pods * pod_s - in_flight * pod_s / 2  # pod-seconds
    t = 0.0
    for _ in range(128):  # the ramp reaches its cap in at most 64 steps
        steps = math.floor((ramp_elapsed_s + t) / ramp.period)
        par = max(1, min(ramp.max, pods, int(ramp.start * ramp.factor ** min(steps, 64))))
        until_next = (steps + 1) * ramp.period - (ramp_elapsed_s + t)
        capped = par >= min(ramp.max, pods)
        if capped and in_flight:
            # pods evenly staggered: the last one ends (1 - 1/par) / 2 of a pod after the
            # work would at full width (4 wide, 7 left, 4 of them half done: 1.625 pods)
            return t + work / par + pod_s * (1 - 1 / par) / 2
        if capped or work <= par * until_next:
            if capped:  # whole waves of `par` pods from here on
                return t + math.ceil(work / (par * pod_s) - 1e-9) * pod_s
            return t + max(work / par, pod_s)
        work -= par * until_next
        t += until_next
    return t + work / max(1, min(ramp.max, pods))


def gate_held(ls: LayerState) -> bool:
    """The Bigtable gate has held or lowered this running layer: its ramp was re-anchored
    (shared.reconcile.bigtable_load.reanchor moves `ramp_started_at` past the submission;
    nothing else does)."""
    started, submitted = ls.timing.ramp_started_at, ls.timing.submitted_at
    return started is not None and submitted is not None and started > submitted


def held_ramp(ramp: Ramp, parallelism: int) -> Ramp:
    """The ramp of a running layer the Bigtable gate holds now or has held
    (shared.reconcile.bigtable_load): it stays at its parallelism. The load that holds it
    comes from the pods that run, so it does not fall for long while they do, and the gate
    lets it grow only as far as the load allows: a forecast that let the ramp grow again
    took the 256^3 demo's layer 2, held at 2 pods for most of its 60 s (the hold lifted for
    a tick now and then), to run at 4."""
    if parallelism < 1:
        return ramp
    held = min(ramp.max, parallelism)
    return ramp.model_copy(update={"start": held, "max": held})


def _pod_seconds(
    run: RunState,
    ls: LayerState,
    batch_chunks: dict[str, int],
    default_chunk_s: float,
    overhead_s: float,
) -> float:
    """One pod of `ls`: its own observed mean, else the start-up plus its batch at the
    per-chunk time of the nearest observed layer below of its stage (else of any layer)."""
    if ls.pods.succeeded:
        return ls.pods.succeeded_runtime_s / ls.pods.succeeded
    below = sorted(
        (o for o in run.layers.values() if o.stage == ls.stage and o.layer < ls.layer),
        key=lambda o: -o.layer,
    )
    others = [o for o in run.layers.values() if o.stage != ls.stage]
    for o in below + others:
        if o.pods.succeeded:
            pod = o.pods.succeeded_runtime_s / o.pods.succeeded
            fixed = min(overhead_s, pod * START_UP_SHARE)
            per_chunk = (pod - fixed) / max(1, batch_chunks[o.key])
            return fixed + per_chunk * batch_chunks[ls.key]
    return overhead_s + default_chunk_s * batch_chunks[ls.key]


def observed_advance_s(run: RunState) -> float | None:
    """Median seconds from a layer's dependencies being done (and its canary, where it had
    one: the canary's run is not an advance) to its Job's submission, over the layers that
    waited on another layer (None before any did)."""
    waits = sorted(
        (ls.timing.submitted_at - max(ready, _canary_done(ls) or ready)).total_seconds()
        for ls in run.layers.values()
        if ls.timing.submitted_at is not None
        and (ready := run.ready_since(ls)) is not None
        and ready != run.created_at
    )
    return max(0.0, waits[len(waits) // 2]) if waits else None


def _canary_done(ls: LayerState) -> datetime | None:
    """When the reconcile found the layer's canary done (None: it had none)."""
    done = ls.canary.record.get("finished_at") if ls.canary.phase == Phase.SUCCEEDED else None
    return datetime.fromisoformat(done) if isinstance(done, str) else None


def forecast(
    run: RunState,
    plans: dict[str, LayerPlan],
    batch_chunks: dict[str, int],
    rates: dict[str, Rate],
    now: datetime,
    default_chunk_s: float = DEFAULT_CHUNK_S,
    advance_s: float = 30.0,
    pod_overhead_s: float = POD_OVERHEAD_S,
    pod_wait_s: float = 0.0,
    completion_s: float = 0.0,
) -> RunForecast:
    """ETA and projected cost of every unfinished layer and of the rest of the run.
    `batch_chunks` maps each layer key to the chunks one of its pods processes, `rates` each
    stage to its price; `advance_s` is used until the run has advanced once; `pod_wait_s`
    is each pod's wait from its creation to its start (its place taken, not billed);
    `completion_s` the time from a layer's last pod done to the controller seeing its Job
    done, after which the next layer's advance begins."""
    observed = observed_advance_s(run)
    advance_s = advance_s if observed is None else observed
    done_at: dict[str, float] = {}  # layer key -> seconds from now until it is done
    out: list[LayerForecast] = []
    for ls in run.ordered_layers():
        plan = plans[ls.key]
        below = run.layer_below(ls)
        if below is not None:
            start = done_at[below.key]
        else:
            deps = dependencies_in(ls.stage, run.stages)
            start = max((done_at[run.top_layer(d).key] for d in deps), default=0.0)
        if ls.phase in (Phase.SUCCEEDED, Phase.FAILED):
            done_at[ls.key] = start
            continue
        left = plan.completions - intervals.count(ls.progress.completed_indexes)
        pod_s = _pod_seconds(run, ls, batch_chunks, default_chunk_s, pod_overhead_s)
        slot_s = pod_s + pod_wait_s  # a place in the ramp: the wait to start, then the pod
        if ls.phase == Phase.RUNNING and ls.timing.ramp_started_at is not None:
            ramp_elapsed = max(0.0, (now - ls.timing.ramp_started_at).total_seconds())
            # pods run at different times once some have finished (and been replaced)
            in_flight = ls.progress.active if ls.pods.succeeded else 0
            held = run.ramp_hold or gate_held(ls)
            ramp = held_ramp(plan.ramp, ls.job.parallelism) if held else plan.ramp
            remaining = drain_seconds(left, slot_s, ramp, ramp_elapsed, in_flight)
        else:
            start += advance_s
            remaining = drain_seconds(left, slot_s, plan.ramp, 0.0)
        remaining += completion_s  # done once the controller sees its Job done
        done_at[ls.key] = start + remaining
        rate = rates[ls.stage]
        usd = pod_cost(rate, plan.cpu, plan.memory_gib, left * pod_s)
        out.append(LayerForecast(ls.key, remaining, start + remaining, usd))
    total = max(done_at.values(), default=0.0)
    # The cluster fee runs while any Job does: the rest of the run, at one cluster.
    fee = max((r.cluster_fee_hr for r in rates.values()), default=0.0) * total / 3600
    observed = any(ls.pods.succeeded for ls in run.layers.values())
    assumed = None if observed else default_chunk_s
    return RunForecast(total, sum(lf.projected_usd for lf in out) + fee, out, assumed)


def run_forecast(cfg: PipelineConfig, run: RunState, now: datetime) -> RunForecast:
    """The forecast `pipeline status`, `pipeline demo` and the demo's `eta_forecasts` show.
    A canary's measurements, where the run has one, give the per-chunk time before any pod
    has finished, a pod's start-up and its wait for a place, and a Job's completion: its last
    pod done -> the reconcile that saw it done, the trigger's delay included, which is the
    reconcile that starts the next layer, so no advance is added to it until one is observed
    (shared.reconcile.canary). Without a canary each advance waits about half a controller
    tick and the other defaults stand."""
    chunk_s = canary_chunk_s(run) or DEFAULT_CHUNK_S
    overhead = canary_pod_overhead_s(run)
    wait = canary_pod_wait_s(run) or 0.0
    completion = canary_completion_s(run)
    advance = cfg.controller.tick_period_s / 2 if completion is None else 0.0
    return forecast(
        run,
        *forecast_inputs(cfg, run),
        now,
        chunk_s,
        advance,
        POD_OVERHEAD_S if overhead is None else overhead,
        wait,
        completion or 0.0,
    )


def forecast_inputs(
    cfg: PipelineConfig, run: RunState, plans: dict[str, LayerPlan] | None = None
) -> tuple[dict[str, LayerPlan], dict[str, int], dict[str, Rate]]:
    """(plans, chunks per pod, rate per stage) of a run, from its config; `plans`: the
    layer plans already built for it (a reconcile's), else built here (not rendered)."""
    if plans is None:
        plans = {k: layer_plan(cfg, run.run_id, ls, render=False) for k, ls in run.layers.items()}
    chunks: dict[str, int] = {}
    for key, ls in run.layers.items():
        per_pod = layer_batch_size(cfg.job.for_stage(ls.stage).batch_size, ls.layer)
        chunks[key] = min(per_pod, math.prod(layer_shape(cfg.layer2_shape(), ls.layer)))
    rates = {
        s: rate_for(
            load_rates(), cfg.region, cfg.job.for_stage(s).compute_class, cfg.job.for_stage(s).spot
        )
        for s in run.stages
    }
    return plans, chunks, rates
