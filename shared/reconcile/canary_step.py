"""The canary's part of a reconcile (shared.reconcile.canary decides; this module turns its answer
into the reconcile's actions). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from shared.jobs.autopilot import Requests
from shared.model.phase import Phase
from shared.model.state import LayerState
from shared.ports.cluster import JobStatus
from shared.reconcile.canary import canary_holds, canary_pods
from shared.reconcile.decision import Action, Alert, CreateJob, LayerPlan, PatchJob, Snapshot
from shared.reconcile.vcpu_budget import VcpuBudget


def canary_step(
    ls: LayerState,
    lp: LayerPlan,
    seen: Snapshot,
    now: datetime,
    out: list[Action],
    vcpus: VcpuBudget | None = None,
) -> bool:
    """Whether the layer's canary holds it back this reconcile (its Job created or awaited,
    or its size just changed); appends the canary's Job creation or alert to `out`. Under
    controller.max_vcpus (`vcpus`) a new canary starts only when one of its pods fits, with
    as many pods at once as the cap leaves room for."""
    if lp.canary is None:
        return False
    name = ls.canary.job or lp.canary.job_name
    parallelism = None
    if ls.canary.phase == Phase.WAITING and vcpus is not None:
        ls.timing.held_by_vcpu_cap = not vcpus.room_for_one(lp.cpu)
        if ls.timing.held_by_vcpu_cap:
            return True
        parallelism = vcpus.take_new(lp.cpu, canary_pods(lp.canary.chunks))
    holds, pending = canary_holds(
        ls,
        lp.canary,
        seen.jobs.get(name),
        seen.pods.get(name, []),
        Requests(lp.cpu, lp.memory_gib),
        now,
        seen.canary_logs,
        parallelism,
    )
    for kind, what in pending:
        if kind == "create":
            job_name, parallelism = what
            out.append(CreateJob(ls.stage, ls.layer, job_name, parallelism))
        else:
            alert, details = what
            out.append(Alert(alert, ls.stage, ls.layer, details))
    return holds


def canary_run_control(
    ls: LayerState, jobs: Mapping[str, JobStatus | None], paused: bool
) -> PatchJob | None:
    """The patch that keeps a layer's running canary Job in step with its run: suspended
    while the run is paused (`pipeline pause`, the budget guard), resumed after; None when it
    is already so, or has ended."""
    if ls.canary.phase != Phase.RUNNING or not ls.canary.job:
        return None
    job = jobs.get(ls.canary.job)
    if job is None or job.finished or job.suspended == paused:
        return None
    return PatchJob(ls.canary.job, suspend=paused)
