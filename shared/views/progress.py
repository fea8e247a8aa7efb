"""A run's progress in chunks, with throughput, ETA and cost, from its stored state. Pure.

Layers store Job indexes (batches); operators think in chunks. A layer of `chunks` chunks in
batches of `batch_size` has ceil(chunks / batch_size) indexes, every one full but the last,
so the chunks done follow from the completed index set and the last index alone.

Throughput is a layer's chunks done over the time it has run (since its Job was submitted),
in chunks per minute. ETAs and projected costs come from the forecast (shared.forecast.forecast: the
runtimes observed so far, the ramp and the parallelism cap, layer after layer), computed on
read from the stored run. Without a forecast (no rate for the region) a running layer's ETA
is its chunks left at its own rate and the run's every chunk left at the run's average rate,
an estimate that ignores that higher layers have fewer, slower chunks, and is labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.forecast.forecast import LayerForecast, RunForecast
from shared.model import intervals
from shared.model.layer_size import LayerSize, chunks_done  # noqa: F401 - re-exported
from shared.model.phase import Phase, RunStatus
from shared.model.stages import dependencies_in
from shared.model.state import LayerState, RunState, layer_key

FORECAST = "forecast"  # ETAs from shared.forecast.forecast
AVERAGE_RATE = "average rate"  # the fallback: the run's chunks left at its average rate


@dataclass(frozen=True)
class LayerPods:
    """What the cluster says about a running layer's pods right now (optional)."""

    ready: int = 0
    oom: int = 0  # attempts killed for exceeding their memory limit
    nodes: frozenset[str] = frozenset()
    cpu_requested: float = 0.0  # vCPU of pods running or pending
    memory_requested_gib: float = 0.0
    pods: int = 0  # running or pending


@dataclass(frozen=True)
class LayerProgress:
    """One layer's row of `pipeline status` (and its `--json`)."""

    stage: str
    layer: int
    phase: str
    chunks_done: int
    chunks_total: int
    percent: float
    active: int
    ready: int | None  # None: the cluster was not read
    retries: int
    failed: int  # failed indexes
    oom: int | None
    parallelism: int
    ramp_target: int | None
    approval: str  # auto, yes, no
    elapsed_s: float | None
    chunks_per_min: float | None
    eta_s: float | None
    cost_usd: float | None
    waits_on: str = ""
    # spent so far plus what the forecast says its remaining pods will cost (None: no forecast)
    projected_usd: float | None = None
    hung: int = 0  # pods deleted as hung (shared.reconcile.hung_pods)

    @property
    def key(self) -> str:
        return layer_key(self.stage, self.layer)


@dataclass(frozen=True)
class ClusterTotals:
    """The cluster as the run's pods use it (nodes seen under running pods)."""

    nodes: int = 0
    spot_nodes: int = 0
    pods: int = 0
    cpu_requested: float = 0.0
    memory_requested_gib: float = 0.0


@dataclass(frozen=True)
class RunProgress:
    """Everything `pipeline status` shows (and `--json` carries)."""

    run_id: str
    graph_id: str
    status: str
    advance: str
    elapsed_s: float | None
    chunks_done: int
    chunks_total: int
    percent: float
    chunks_per_min: float | None
    eta_s: float | None
    cost_usd: float | None  # the pods' and the cluster fee
    budget_usd: float | None
    cluster: ClusterTotals | None
    layers: list[LayerProgress] = field(default_factory=list)
    cluster_fee_usd: float | None = None  # the part of cost_usd that no layer's row has
    # Layers that failed while the run goes on (it stops advancing past them until they are
    # re-submitted): the run has no ETA then.
    failed_layers: tuple[str, ...] = ()
    eta_basis: str = AVERAGE_RATE  # FORECAST when eta_s comes from shared.forecast.forecast
    projected_usd: float | None = None  # spent plus the forecast cost of the rest of the run
    assumed_chunk_s: float | None = None  # the forecast's guess before any pod finished
    # Mid-graph starts recorded on the run (shared/operate/start_from.py), one line each.
    starts: tuple[str, ...] = ()
    # Why the ramp holds (the graph's Bigtable is busy; shared.reconcile.bigtable_load), "" if it
    # does not.
    ramp_hold: str = ""
    # Right-size suggestions (shared.reconcile.rightsize.Suggestion.to_dict), in build order.
    rightsize: tuple[dict[str, Any], ...] = ()
    canaries: tuple[dict[str, Any], ...] = ()  # shared.reconcile.canary.canary_summary


def describe_start(stage: str, start: dict[str, Any]) -> str:
    """One line for `pipeline start` and `pipeline status` on a recorded mid-graph start."""
    layer, by, at = start.get("layer"), start.get("by", "?"), start.get("at")
    when = at.strftime("%Y-%m-%d %H:%M UTC") if isinstance(at, datetime) else str(at or "?")
    below = f"layers 2..{int(layer) - 1}" if isinstance(layer, int) else "the layers below"
    if start.get("verified", True):
        return f"{stage} started at layer {layer} by {by} at {when}: {below} found marked done"
    return (
        f"{stage} started at layer {layer} by {by} at {when}: {below} NOT verified (its pods "
        "write no done markers; trusted as the predecessor trusted start_layer)"
    )


def waits_on(run: RunState, ls: LayerState) -> str:
    """What a waiting layer waits for: a layer below, another stage, its setup pass, an
    approval, a pause, room under the vCPU cap."""
    if ls.phase != Phase.WAITING:
        return ""
    below = run.layer_below(ls)
    if below is not None and below.phase != Phase.SUCCEEDED:
        return f"{below.key} ({below.phase})"
    if below is None:
        deps = dependencies_in(ls.stage, run.stages)
        open_deps = [d for d in deps if not run.stage_complete(d)]
        if open_deps:
            return "stage " + ", ".join(open_deps)
        setup = run.setups.get(ls.stage)
        if setup is not None and setup.phase != Phase.SUCCEEDED:  # the stage's setup pass
            # inspect shows its error, traceback and fix (then `pipeline submit ... 0`)
            fix = (
                f": pipeline inspect {run.run_id} {ls.stage} 0"
                if setup.phase == Phase.FAILED
                else ""
            )
            return f"{ls.stage} setup ({setup.phase}{fix})"
    if run.advance != "auto" and not ls.approval.granted:
        return f"approval: pipeline approve {run.run_id} {ls.stage} {ls.layer}"
    if run.status == RunStatus.PAUSED:
        return f"run paused: pipeline resume {run.run_id}"
    if ls.timing.held_by_vcpu_cap:
        return "room under controller.max_vcpus (running layers hold it)"
    return "the controller's next reconcile"


def _seconds(start: datetime | None, end: datetime | None, now: datetime) -> float | None:
    return None if start is None else max(0.0, ((end or now) - start).total_seconds())


def _approval(run: RunState, ls: LayerState) -> str:
    return "auto" if run.advance == "auto" else ("yes" if ls.approval.granted else "no")


def layer_progress(
    run: RunState,
    ls: LayerState,
    size: LayerSize,
    now: datetime,
    *,
    ramp_target: int | None = None,
    cost_usd: float | None = None,
    pods: LayerPods | None = None,
    forecast: LayerForecast | None = None,
) -> LayerProgress:
    """One layer's progress in chunks, its rate, ETA and projected cost.

    With the layer's `forecast` (shared.forecast.forecast), a running or waiting layer's ETA is when
    it will be done from now (a waiting layer's wait included) and its projected cost what
    it spent plus what its remaining pods will cost. Without one, only a running layer has
    an ETA: its chunks left at its own rate so far."""
    total = size.chunks
    done = (
        total if ls.phase == Phase.SUCCEEDED else chunks_done(ls.progress.completed_indexes, size)
    )
    elapsed = _seconds(ls.timing.submitted_at, ls.timing.finished_at, now)
    rate = eta = None
    if elapsed and done:
        rate = done / (elapsed / 60)
        eta = 0.0 if done >= total else (total - done) / rate * 60
    running = ls.phase == Phase.RUNNING
    projected = None
    if ls.phase == Phase.SUCCEEDED:
        projected = cost_usd
    elif forecast is not None:
        eta = forecast.finishes_in_s
        projected = (cost_usd or 0.0) + forecast.projected_usd
    return LayerProgress(
        stage=ls.stage,
        layer=ls.layer,
        phase=ls.phase,
        chunks_done=done,
        chunks_total=total,
        percent=100 * done / total if total else 0.0,
        active=ls.progress.active if running else 0,
        ready=pods.ready if pods is not None else None,
        retries=ls.pods.failed,
        failed=intervals.count(ls.progress.failed_indexes),
        # The layer's own count (pods since garbage-collected included) or the listing's.
        oom=_oom(ls, pods),
        parallelism=ls.job.parallelism if running else 0,
        ramp_target=ramp_target if running else None,
        approval=_approval(run, ls),
        elapsed_s=elapsed,
        chunks_per_min=rate,
        eta_s=eta if running or (forecast is not None and ls.phase == Phase.WAITING) else None,
        cost_usd=cost_usd,
        waits_on=waits_on(run, ls),
        projected_usd=projected,
        hung=ls.faults.hung,
    )


def cluster_totals(pods: list[LayerPods], spot_nodes: set[str]) -> ClusterTotals:
    """Nodes under the run's pods (Spot: those `spot_nodes` names), pods and requests."""
    nodes = set().union(*(p.nodes for p in pods)) if pods else set()
    return ClusterTotals(
        nodes=len(nodes),
        spot_nodes=len(nodes & spot_nodes),
        pods=sum(p.pods for p in pods),
        cpu_requested=sum(p.cpu_requested for p in pods),
        memory_requested_gib=sum(p.memory_requested_gib for p in pods),
    )


def run_progress(
    run: RunState,
    layers: list[LayerProgress],
    now: datetime,
    *,
    cost_usd: float | None = None,
    cluster_fee_usd: float | None = None,
    cluster: ClusterTotals | None = None,
    forecast: RunForecast | None = None,
) -> RunProgress:
    """The run's totals from its layers' rows: chunks, the average rate while layers ran
    (their running spans, overlaps counted once), and the ETA and projected cost of the rest
    of the run from its `forecast` (without one: the ETA at the average rate, no projection).
    A run going on with failed layers has no ETA (`failed_layers` names them)."""
    done = sum(lp.chunks_done for lp in layers)
    total = sum(lp.chunks_total for lp in layers)
    spans = sorted(
        (ls.timing.submitted_at, ls.timing.finished_at or now)
        for ls in run.layers.values()
        if ls.timing.submitted_at is not None
    )
    busy = 0.0
    cursor: datetime | None = None
    for start, end in spans:  # union of the running spans
        if cursor is None or start > cursor:
            busy += (end - start).total_seconds()
            cursor = end
        elif end > cursor:
            busy += (end - cursor).total_seconds()
            cursor = end
    rate = done / (busy / 60) if busy > 0 and done else None
    finished = run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED) or done >= total
    eta = None if rate is None else (0.0 if finished else (total - done) / rate * 60)
    basis, projected = AVERAGE_RATE, None
    if forecast is not None:
        basis = FORECAST
        eta = 0.0 if finished else forecast.remaining_s
        projected = (cost_usd or 0.0) + (0.0 if finished else forecast.projected_usd)
    failed = () if finished else tuple(lp.key for lp in layers if lp.phase == Phase.FAILED)
    if failed:  # the layers above a failed one wait until it is re-submitted: no end in sight
        eta = None
    return RunProgress(
        run_id=run.run_id,
        graph_id=run.graph_id,
        status=run.status,
        advance=run.advance,
        elapsed_s=_seconds(run.created_at, run.finished_at, now),
        chunks_done=done,
        chunks_total=total,
        percent=100 * done / total if total else 0.0,
        chunks_per_min=rate,
        eta_s=eta,
        cost_usd=cost_usd,
        cluster_fee_usd=cluster_fee_usd,
        failed_layers=failed,
        budget_usd=run.budget_usd,
        cluster=cluster,
        layers=layers,
        eta_basis=basis,
        projected_usd=projected,
        assumed_chunk_s=None if forecast is None else forecast.assumed_chunk_s,
        starts=tuple(describe_start(s, start) for s, start in run.mid_graph_starts.items()),
        ramp_hold=run.ramp_hold,
    )


# Which rows a fixed-height table keeps: what needs attention, the latest done (for context),
# then what comes next, then older done layers.
ROW_PRIORITY = {Phase.RUNNING: 0, Phase.FAILED: 1, Phase.WAITING: 3, Phase.SUCCEEDED: 4}
RECENT_DONE = 2  # succeeded layers ranked before the waiting ones


def _oom(ls: LayerState, pods: LayerPods | None) -> int | None:
    """OOM kills of the layer's attempt: as counted by the controller, or as listed now
    (whichever saw more); None when neither knows (no count, cluster not read)."""
    if pods is None:
        return ls.faults.oom_killed or None
    return max(ls.faults.oom_killed, pods.oom)


def visible_rows(layers: list[LayerProgress], max_rows: int) -> tuple[list[LayerProgress], dict]:
    """At most `max_rows` layers in build order (running and failed first, then the latest
    two succeeded, then the next waiting ones, then older succeeded), and the count of the
    others by phase."""
    if len(layers) <= max_rows:
        return list(layers), {}
    order = {id(lp): i for i, lp in enumerate(layers)}
    done = [lp for lp in layers if lp.phase == Phase.SUCCEEDED]
    recent = {id(lp) for lp in done[-RECENT_DONE:]}

    def rank(lp: LayerProgress) -> tuple[int, int]:
        i = order[id(lp)]
        if id(lp) in recent:
            return 2, -i
        return ROW_PRIORITY.get(lp.phase, 3), -i if lp.phase == Phase.SUCCEEDED else i

    keep = sorted(layers, key=rank)[:max_rows]
    kept = {id(lp) for lp in keep}
    hidden: dict[str, int] = {}
    for lp in layers:
        if id(lp) not in kept:
            hidden[lp.phase] = hidden.get(lp.phase, 0) + 1
    return sorted(keep, key=lambda lp: order[id(lp)]), hidden


def blocking_waits(layers: list[LayerProgress]) -> tuple[list[LayerProgress], int]:
    """The waiting layers at the front (waiting on something other than another waiting
    layer: a running layer, a stage, an approval, a pause), and how many wait behind them."""
    waiting = {lp.key for lp in layers if lp.phase == Phase.WAITING}
    front = [lp for lp in layers if lp.waits_on and lp.waits_on.split(" ")[0] not in waiting]
    behind = sum(1 for lp in layers if lp.waits_on) - len(front)
    return front, behind
