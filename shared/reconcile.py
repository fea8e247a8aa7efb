"""The reconcile decision: stored run state + observed Jobs + clock -> new state + actions.

Pure: no I/O. `shared.controller` reads the inputs through adapters, commits the new state
under a precondition on the run's version, and only then performs the actions. Every trigger
(Job event, tick, operator kick) ends here, so the outcome never depends on which event was
seen, or how often.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared import intervals
from shared.cluster import JobStatus, PodInfo
from shared.config import Ramp
from shared.pod_accounting import PodRecord, close_layer, record_pods
from shared.state import LayerState, RunState


@dataclass(frozen=True)
class LayerPlan:
    """What the config says about one layer: its size, ramp and per-pod requests."""

    completions: int
    ramp: Ramp
    cpu: float = 0.0
    memory_gib: float = 0.0


@dataclass(frozen=True)
class CreateJob:
    stage: str
    layer: int
    job_name: str
    parallelism: int
    suspend: bool = False


@dataclass(frozen=True)
class PatchJob:
    job_name: str
    parallelism: int | None = None
    suspend: bool | None = None


@dataclass(frozen=True)
class DeleteJob:
    job_name: str


@dataclass(frozen=True)
class Alert:
    """An alert for the `alerts` topic; `kind` becomes the message attribute."""

    kind: str
    stage: str = ""
    layer: int = 0
    details: dict[str, Any] = field(default_factory=dict)


Action = CreateJob | PatchJob | DeleteJob | Alert


@dataclass
class Decision:
    """The new state, the side effects to perform after committing it, the pod attempts to
    record, and whether the state differs from what was read (nothing to commit if not)."""

    state: RunState
    actions: list[Action]
    pod_records: dict[str, list[PodRecord]] = field(default_factory=dict)
    changed: bool = False


@dataclass(frozen=True)
class Settings:
    stall_after_s: float = 1800.0
    # Estimated spend of a run at a time (shared.costs, bound to the rate table); the budget
    # guard needs it. None: no pricing, no budget guard.
    spend: Callable[[RunState, datetime], float] | None = None


def ramp_target(ramp: Ramp, completions: int, started: datetime | None, now: datetime) -> int:
    """Parallelism the ramp allows at `now`: start * factor**steps, capped; at least 1."""
    cap = max(1, min(ramp.max, completions))
    if started is None:
        return min(ramp.start, cap)
    steps = max(0, math.floor((now - started).total_seconds() / ramp.period))
    # Bound the exponent so a multi-day run never overflows a float.
    value = ramp.start * ramp.factor ** min(steps, 64)
    return int(min(max(ramp.start, value), cap))


def _job_progress(ls: LayerState, job: JobStatus, now: datetime, out: list[Action]) -> None:
    """Copy the Job's index sets into the layer and alert newly failed indexes once."""
    ls.completed_indexes = job.completed_indexes
    ls.failed_indexes = job.failed_indexes
    ls.active = 0 if job.finished else job.active
    done = intervals.count(job.completed_indexes)
    if done > ls.progress_count or ls.progress_at is None:
        ls.progress_count, ls.progress_at, ls.stall_alerted = done, now, False
    fresh = set(intervals.parse(job.failed_indexes)) - set(intervals.parse(ls.alerted_indexes))
    if fresh:
        out.append(
            Alert(
                "failed_indexes", ls.stage, ls.layer, {"indexes": sorted(fresh), "job": ls.job_name}
            )
        )
        ls.alerted_indexes = intervals.format(set(intervals.parse(ls.alerted_indexes)) | fresh)


def _running_layer(
    run: RunState,
    ls: LayerState,
    job: JobStatus | None,
    plan: LayerPlan,
    now: datetime,
    settings: Settings,
    out: list[Action],
) -> None:
    paused = run.status == "paused"
    if job is None:
        # Committed as running but the Job is missing (crash between commit and create, or
        # deleted by hand): create it again; the deterministic name makes this idempotent.
        out.append(CreateJob(ls.stage, ls.layer, ls.job_name, max(1, ls.parallelism), paused))
        return
    _job_progress(ls, job, now, out)
    if job.condition == "Complete":
        ls.phase, ls.finished_at = "succeeded", job.completion_time or now
        return
    if job.condition == "Failed":
        ls.phase, ls.finished_at, ls.failure_reason = "failed", now, job.reason or "Failed"
        out.append(
            Alert(
                "layer_failed",
                ls.stage,
                ls.layer,
                {"reason": ls.failure_reason, "failed_indexes": job.failed_indexes},
            )
        )
        return
    if paused:
        if not job.suspended:
            out.append(PatchJob(ls.job_name, suspend=True))
        return
    if job.suspended:
        out.append(PatchJob(ls.job_name, suspend=False))
    target = ls.scale_override or ramp_target(plan.ramp, plan.completions, ls.ramp_started_at, now)
    target = max(1, min(target, plan.completions))
    if ls.scale_override is None:
        target = max(target, min(ls.parallelism, plan.completions))  # the ramp never lowers
    if target != job.parallelism:
        out.append(PatchJob(ls.job_name, parallelism=target))
    ls.parallelism = target
    stalled_for = (now - (ls.progress_at or now)).total_seconds()
    if stalled_for >= settings.stall_after_s and not ls.stall_alerted:
        ls.stall_alerted = True
        out.append(
            Alert("layer_stalled", ls.stage, ls.layer, {"no_progress_s": round(stalled_for)})
        )


def _eligible_since(run: RunState, ls: LayerState) -> datetime | None:
    """When the layer could first have started: its dependencies met and, unless the run
    advances on its own, its approval set."""
    stamps = [t for t in (run.ready_since(ls),) if t]
    if run.advance != "auto" and ls.approved_at:
        stamps.append(ls.approved_at)
    return max(stamps) if stamps else None


def _budget_guard(
    state: RunState,
    jobs: dict[str, JobStatus | None],
    now: datetime,
    settings: Settings,
    out: list[Action],
) -> None:
    """Pause the run (suspending its Jobs) once its estimated spend reaches the budget."""
    if not state.budget_usd or settings.spend is None or state.budget_alerted:
        return
    spend = settings.spend(state, now)
    if spend < state.budget_usd:
        return
    state.budget_alerted = True
    if state.status == "running":
        state.status = "paused"
        for ls in state.layers.values():
            job = jobs.get(ls.job_name)
            if ls.phase == "running" and job is not None and not job.suspended:
                out.append(PatchJob(ls.job_name, suspend=True))
    details = {"spend_usd": round(spend, 4), "budget_usd": state.budget_usd}
    out.append(Alert("budget_reached", details=details))


def decide(
    run: RunState,
    jobs: dict[str, JobStatus | None],
    plans: dict[str, LayerPlan],
    now: datetime,
    job_name_for: Callable[[LayerState], str],
    settings: Settings = Settings(),
    pods: dict[str, list[PodInfo]] | None = None,
) -> Decision:
    """Decide what to do for one run. `jobs` maps each running layer's Job name to what the
    cluster reports (None: no such Job), `pods` its pods. Returns the new state, the actions
    to take and the pod attempts to record."""
    state = copy.deepcopy(run)
    out: list[Action] = []
    records: dict[str, list[PodRecord]] = {}
    if state.status in ("succeeded", "failed"):
        return Decision(state, out)
    for ls in state.ordered_layers():
        plan = plans[ls.key]
        if ls.delete_requested:
            ls.delete_requested = False
            out.append(DeleteJob(ls.job_name))
            continue
        if ls.phase == "running":
            if pods and ls.job_name in pods:
                records[ls.key] = record_pods(ls, pods[ls.job_name], now)
            _running_layer(state, ls, jobs.get(ls.job_name), plan, now, settings, out)
            if ls.phase != "running":
                close_layer(ls)
        elif ls.phase == "waiting" and state.status == "running" and state.dependencies_met(ls):
            if state.advance == "auto" or ls.approved:
                ls.phase, ls.completions = "running", plan.completions
                ls.cpu_request, ls.memory_request_gib = plan.cpu, plan.memory_gib
                ls.job_name = job_name_for(ls)
                ls.eligible_at = _eligible_since(state, ls) or now
                ls.submitted_at = ls.ramp_started_at = ls.progress_at = now
                ls.parallelism = ramp_target(plan.ramp, plan.completions, now, now)
                out.append(CreateJob(ls.stage, ls.layer, ls.job_name, ls.parallelism))
            elif not ls.approval_alerted:
                ls.approval_alerted = True
                out.append(Alert("approval_needed", ls.stage, ls.layer, {"advance": run.advance}))
    _budget_guard(state, jobs, now, settings, out)
    if all(ls.phase == "succeeded" for ls in state.layers.values()):
        state.status, state.finished_at = "succeeded", now
        if not state.finish_alerted:
            state.finish_alerted = True
            out.append(Alert("run_finished", details={"status": "succeeded"}))
    return Decision(state, out, {k: v for k, v in records.items() if v}, _state_differs(run, state))


def _state_differs(before: RunState, after: RunState) -> bool:
    return before.run_doc() != after.run_doc() or any(
        before.layers[k].to_doc() != after.layers[k].to_doc() for k in after.layers
    )
