"""The decision of a reconcile: what was observed + the plan + rates + clock -> new state +
actions (:func:`decide`), and the refused Job creations taken back (:func:`reject`).

Pure: no I/O, no clock (`now` is an argument). `shared.control.reconciler` observes the run and its
Jobs, builds the plan (`shared.reconcile.build_plan.plan_for`), asks :func:`decide`, dry-runs the
Jobs it creates, lets :func:`reject` fail the layers whose manifest was refused, commits the new
state under a precondition on the run's version, and only then acts (docs/controller.md). Every
trigger (Job event, tick, operator kick) ends here, so the outcome never depends on which
event was seen, or how often. Its vocabulary (plan, snapshot, actions) is
`shared.reconcile.decision`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

from shared.model import intervals
from shared.model.phase import Phase, RunStatus
from shared.model.state import SETUP_LAYER, LayerState, RunState, layer_key
from shared.money.costs import Billing, run_cost
from shared.money.pricing import RateRow
from shared.ports.cluster import JobStatus
from shared.reconcile.bigtable_load import FREE, RampGate, gate, throttle
from shared.reconcile.canary import canary_details
from shared.reconcile.canary_step import canary_run_control, canary_step
from shared.reconcile.completeness import LayerVerdict
from shared.reconcile.decision import (
    Action,
    Alert,
    ApplyConfigMap,
    CreateJob,
    Decision,
    DeleteJob,
    DeletePod,
    LayerPlan,
    PatchJob,
    Plan,
    Snapshot,
)
from shared.reconcile.evictions import ALERT_KIND as EVICTED_REPEATEDLY
from shared.reconcile.evictions import eviction_alert_details
from shared.reconcile.hung_pods import mark_handled, note_chunk_times
from shared.reconcile.layer_verify import apply_ledger_check
from shared.reconcile.oom import oom_alert_details
from shared.reconcile.ownership import foreign_owner
from shared.reconcile.parallelism import parallelism_target, ramp_target
from shared.reconcile.pod_accounting import (
    FINISHED,
    PodRecord,
    close_layer,
    note_earlier_usage,
    record_pods,
)
from shared.reconcile.process_start import note_process_start
from shared.reconcile.resize import resize_step
from shared.reconcile.root_check import ALERT_KIND as ROOT_CHECK_FAILED
from shared.reconcile.root_check import root_check_details
from shared.reconcile.setup_step import fail_setup, setup_step
from shared.reconcile.vcpu_budget import VcpuBudget

__all__ = ["decide", "ramp_target", "reject"]


def _job_progress(ls: LayerState, job: JobStatus, now: datetime, out: list[Action]) -> None:
    """Copy the Job's index sets into the layer and alert newly failed indexes once."""
    ls.progress.completed_indexes = job.completed_indexes
    ls.progress.failed_indexes = job.failed_indexes
    ls.progress.active = 0 if job.finished else job.active
    done = intervals.count(job.completed_indexes)
    if done > ls.progress.count or ls.progress.at is None:
        ls.progress.count, ls.progress.at, ls.progress.stall_alerted = done, now, False
    fresh = set(intervals.parse(job.failed_indexes)) - set(
        intervals.parse(ls.progress.alerted_indexes)
    )
    if fresh:
        out.append(
            Alert(
                "failed_indexes", ls.stage, ls.layer, {"indexes": sorted(fresh), "job": ls.job.name}
            )
        )
        ls.progress.alerted_indexes = intervals.format(
            set(intervals.parse(ls.progress.alerted_indexes)) | fresh
        )


def _failed_indexes_of(action: Action, ls: LayerState) -> bool:
    """Whether `action` is a `failed_indexes` alert of layer `ls`."""
    return (
        isinstance(action, Alert)
        and action.kind == "failed_indexes"
        and (action.stage, action.layer) == (ls.stage, ls.layer)
    )


def _running_layer(
    run: RunState,
    ls: LayerState,
    job: JobStatus | None,
    plan: LayerPlan,
    now: datetime,
    stall_after_s: float,
    out: list[Action],
    vcpus: VcpuBudget | None = None,
    bigtable: RampGate = FREE,
    root_verdict: LayerVerdict | None = None,
) -> None:
    paused = run.status == RunStatus.PAUSED
    if job is None:
        # Committed as running but the Job is missing (crash between commit and create, or
        # deleted by hand): create it again; the deterministic name makes this idempotent.
        out.append(CreateJob(ls.stage, ls.layer, ls.job.name, max(1, ls.job.parallelism), paused))
        return
    foreign = foreign_owner(job, run, ls)
    if foreign is not None:
        # A leftover under our name (a purged run's, another attempt's): never adopt its
        # progress or its Complete condition, never touch it.
        ls.phase, ls.timing.finished_at, ls.failure_reason = Phase.FAILED, now, foreign
        out.append(Alert("layer_failed", ls.stage, ls.layer, {"reason": foreign, "fix": foreign}))
        return
    _job_progress(ls, job, now, out)
    if job.condition == "Complete":
        ls.phase, ls.timing.finished_at = Phase.SUCCEEDED, job.completion_time or now
        return
    if job.condition == "Failed" and plan.root_check and root_verdict and root_verdict.complete:
        # Every marker written and the Job failed: PyChunkedGraph's root check failed after
        # the chunk was built (shared.reconcile.root_check), not a complete layer.
        ls.phase, ls.timing.finished_at, ls.root_check_failed = Phase.FAILED, now, True
        ls.progress.chunks_marked = root_verdict.chunks_marked
        details = root_check_details(
            run.run_id,
            ls.stage,
            ls.layer,
            ls.job.name,
            job.failed_indexes,
            root_verdict.chunks_marked,
        )
        ls.failure_reason = details["reason"]
        # Its failed index is the check's, not a chunk's: the `failed_indexes` alert raised
        # for it just now would name the built root chunk as the failure.
        out[:] = [a for a in out if not _failed_indexes_of(a, ls)]
        out.append(Alert(ROOT_CHECK_FAILED, ls.stage, ls.layer, details))
        return
    if job.condition == "Failed":
        ls.phase, ls.timing.finished_at, ls.failure_reason = (
            Phase.FAILED,
            now,
            job.reason or "Failed",
        )
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
            out.append(PatchJob(ls.job.name, suspend=True))
        return
    if job.suspended:
        out.append(PatchJob(ls.job.name, suspend=False))
    target = parallelism_target(
        plan.ramp,
        plan.completions,
        ls.timing.ramp_started_at,
        now,
        override=ls.job.scale_override,
        current=ls.job.parallelism,
    )
    if ls.job.scale_override is None:
        # A busy Bigtable holds the ramp or steps it down (docs/bigtable-ramp-and-bill.md).
        gated = throttle(
            bigtable, target, ls.job.parallelism, plan.ramp, now, ls.timing.ramp_lowered_at
        )
        target = gated.parallelism
        ls.timing.ramp_started_at = gated.ramp_started_at or ls.timing.ramp_started_at
        ls.timing.ramp_lowered_at = gated.lowered_at or ls.timing.ramp_lowered_at
    if vcpus is not None:
        target = vcpus.take_running(ls, plan.cpu, target)
    if target != job.parallelism:
        out.append(PatchJob(ls.job.name, parallelism=target))
    ls.job.parallelism = target
    stalled_for = (now - (ls.progress.at or now)).total_seconds()
    if stalled_for >= stall_after_s and not ls.progress.stall_alerted:
        ls.progress.stall_alerted = True
        out.append(
            Alert("layer_stalled", ls.stage, ls.layer, {"no_progress_s": round(stalled_for)})
        )


def _eligible_since(run: RunState, ls: LayerState) -> datetime | None:
    """When the layer could first have started: its dependencies met and, unless the run
    advances on its own, its approval set."""
    stamps = [t for t in (run.ready_since(ls),) if t]
    if run.advance != "auto" and ls.approval.at:
        stamps.append(ls.approval.at)
    return max(stamps) if stamps else None


def _budget_guard(
    state: RunState,
    jobs: dict[str, JobStatus | None],
    now: datetime,
    billing: Billing | None,
    rates: tuple[RateRow, ...] | None,
    out: list[Action],
) -> None:
    """Pause the run (suspending its Jobs) once its estimated spend reaches the budget."""
    if not state.budget_usd or billing is None or rates is None or state.budget_alerted:
        return
    cost = run_cost(state, rates, billing, now)
    spend = cost.usd
    if spend < state.budget_usd:
        return
    state.budget_alerted = True
    if state.status == RunStatus.RUNNING:
        state.status = RunStatus.PAUSED
        for ls in state.layers.values():
            job = jobs.get(ls.job.name)
            if ls.phase == Phase.RUNNING and job is not None and not job.suspended:
                out.append(PatchJob(ls.job.name, suspend=True))
            if (patch := canary_run_control(ls, jobs, paused=True)) is not None:
                out.append(patch)
    details = {
        "spend_usd": round(spend, 4),
        "budget_usd": state.budget_usd,
        # The breakdown (unrounded: a small run's pods cost fractions of a cent).
        "pods_usd": spend - cost.cluster_fee_usd,
        "cluster_fee_usd": cost.cluster_fee_usd,
    }
    out.append(Alert("budget_reached", details=details))


def decide(
    seen: Snapshot, plan: Plan, rates: tuple[RateRow, ...] | None, now: datetime
) -> Decision:
    """Decide what to do for one run: the new state, the actions to take after committing it
    and the pod attempts to record. `rates` price the budget guard (None: no guard)."""
    run, jobs, pods = seen.run, seen.jobs, seen.pods
    state = copy.deepcopy(run)
    out: list[Action] = []
    records: dict[str, list[PodRecord]] = {}
    again = False
    if state.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        return Decision(state, out, now)
    vcpus = VcpuBudget.of(plan.max_vcpus, state, seen.others_vcpus)
    bigtable = gate(seen.bigtable_load, plan.bigtable_cpu_max, seen.bigtable_load_lag_s)
    running = any(ls.phase == Phase.RUNNING for ls in state.layers.values())
    state.ramp_hold = bigtable.reason if running else ""
    for setup in state.setups.values():
        sp = plan.setups.get(setup.stage)
        if sp is not None:
            setup_step(state, setup, sp, seen, now, out)
    for ls in state.ordered_layers():
        lp = plan.layers[ls.key]
        if ls.job.delete_requested:
            ls.job.delete_requested = False
            out.append(DeleteJob(ls.job.name))
            continue
        if ls.job.retire_job and not _retired(ls, seen, out):
            continue  # the earlier attempt's pods still run: never overlap them
        # A running canary is paused and resumed with its run, as layer Jobs are.
        if (patch := canary_run_control(ls, jobs, state.status == RunStatus.PAUSED)) is not None:
            out.append(patch)
        if ls.phase == Phase.RUNNING:
            job = jobs.get(ls.job.name)
            if ls.job.name in pods:
                # A Complete Job's completion time vouches for pods that vanished unseen.
                record = job.completion_time if job is not None else None
                records[ls.key] = record_pods(ls, pods[ls.job.name], now, record)
                oom = oom_alert_details(ls, lp.processes, lp.processes_per_vcpu)
                if oom is not None:
                    out.append(Alert("oom_killed", ls.stage, ls.layer, oom))
                evicted = eviction_alert_details(ls, lp.max_evictions_per_index)
                if evicted is not None:
                    out.append(Alert(EVICTED_REPEATEDLY, ls.stage, ls.layer, evicted))
                note_chunk_times(ls, records[ls.key], lp.batch_chunks)
                if (first_log := seen.first_pod_logs.get(ls.key)) is not None:
                    note_process_start(ls, first_log)
                _hung_pods(ls, seen, out)
                if state.status == RunStatus.RUNNING:
                    resize_step(ls, lp, pods[ls.job.name], out)
            _running_layer(
                state,
                ls,
                job,
                lp,
                now,
                plan.stall_after_s,
                out,
                vcpus,
                bigtable,
                seen.ledger_checks.get(ls.key),
            )
            apply_ledger_check(state.run_id, ls, seen.ledger_checks.get(ls.key), now, out)
            if ls.phase != Phase.RUNNING:
                if ls.job.name in seen.usage_read:  # read from monitoring as the Job ended
                    note_earlier_usage(ls, pods[ls.job.name], records.get(ls.key, []))
                close_layer(ls)
        elif (
            ls.phase == Phase.WAITING
            and state.status == RunStatus.RUNNING
            and state.dependencies_met(ls)
        ):
            if canary_step(ls, lp, seen, now, out, vcpus):
                # Resized by its canary just now: planned at the new size by the next pass.
                again = again or _canary_ended(ls, run.layers[ls.key])
                continue
            if state.advance == "auto" or ls.approval.granted:
                ls.timing.held_by_vcpu_cap = vcpus is not None and not vcpus.room_for_one(lp.cpu)
                if not ls.timing.held_by_vcpu_cap:
                    _start_layer(state, ls, lp, now, out, vcpus)
            elif not ls.approval.alerted:
                ls.approval.alerted = True
                details = {"advance": run.advance, **canary_details(ls)}
                out.append(Alert("approval_needed", ls.stage, ls.layer, details))
    _budget_guard(state, jobs, now, plan.billing, rates, out)
    if all(ls.phase == Phase.SUCCEEDED for ls in state.layers.values()):
        state.status, state.finished_at = RunStatus.SUCCEEDED, now
        if not state.finish_alerted:
            state.finish_alerted = True
            out.append(Alert("run_finished", details={"status": RunStatus.SUCCEEDED}))
    records = {k: v for k, v in records.items() if v}
    changed = _state_differs(run, state)
    return Decision(state, out, now, records, changed, again=again and changed)


def _canary_ended(ls: LayerState, before: LayerState) -> bool:
    """The layer's canary ended in this pass (it was not over when the run was read)."""
    return ls.canary.phase == Phase.SUCCEEDED and before.canary.phase != Phase.SUCCEEDED


def _hung_pods(ls: LayerState, seen: Snapshot, out: list[Action]) -> None:
    """Delete the layer's hung pods and alert each once (counted on the layer); a pod
    already handled that is still listed running gets its (idempotent) delete again, so a
    delete lost after the commit is not lost for good."""
    for hung in mark_handled(ls, seen.hung.get(ls.key, ())):
        out.append(DeletePod(ls.job.name, hung.name))
        details = {
            "job": ls.job.name,
            "pod": hung.name,
            "index": hung.index,
            "no_progress_s": round(hung.idle_s),
            "hung_after_s": round(hung.hung_after_s),
            "last_progress": hung.last_progress.isoformat(),
            "log_tail": hung.log_tail,
        }
        out.append(Alert("pod_hung", ls.stage, ls.layer, details))
    fresh = {d.pod_name for d in out if isinstance(d, DeletePod)}
    handled = set(ls.faults.hung_pod_uids)
    for pod in seen.pods.get(ls.job.name, ()):
        if pod.uid in handled and pod.phase == "Running" and pod.name not in fresh:
            out.append(DeletePod(ls.job.name, pod.name))


def _retired(ls: LayerState, seen: Snapshot, out: list[Action]) -> bool:
    """Whether a re-submitted layer's earlier Job is out of the way: deleted, when the
    operator asked (re-sent while it is listed: deletes are idempotent), and none of its pods
    still listed unfinished. Clears the record once it is."""
    job = seen.jobs.get(ls.job.retire_job)
    if ls.job.retire_delete and job is not None:
        out.append(DeleteJob(ls.job.retire_job))
        return False
    if any(p.phase not in FINISHED for p in seen.pods.get(ls.job.retire_job, ())):
        return False
    ls.job.retire_job, ls.job.retire_delete = "", False
    return True


def _start_layer(
    state: RunState,
    ls: LayerState,
    lp: LayerPlan,
    now: datetime,
    out: list[Action],
    vcpus: VcpuBudget | None = None,
) -> None:
    ls.phase, ls.job.completions = Phase.RUNNING, lp.completions
    ls.pods.cpu_request, ls.pods.memory_request_gib = lp.cpu, lp.memory_gib
    ls.job.name = lp.job_name
    ls.timing.eligible_at = _eligible_since(state, ls) or now
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = now
    ls.job.parallelism = ramp_target(lp.ramp, lp.completions, now, now)
    if vcpus is not None:
        ls.job.parallelism = vcpus.take_new(lp.cpu, ls.job.parallelism)
    out.append(CreateJob(ls.stage, ls.layer, ls.job.name, ls.job.parallelism))


def reject(decision: Decision, refusals: dict[str, str]) -> Decision:
    """The decision with every refused Job creation taken back: its layer is failed with the
    reason and a `layer_failed` alert naming the fix. `refusals` maps a Job name to why the
    config or the API server refuses its manifest. The only place a layer fails for that."""
    refused = [a for a in decision.actions if isinstance(a, CreateJob) and a.job_name in refusals]
    if not refused:
        return decision
    state = copy.deepcopy(decision.state)
    # A refused Job's ConfigMap goes with it: nothing will mount it.
    actions = [
        a
        for a in decision.actions
        if a not in refused and not (isinstance(a, ApplyConfigMap) and a.job_name in refusals)
    ]
    for action in refused:
        if action.layer == SETUP_LAYER:
            reason = f"rejected: {refusals[action.job_name]}"
            fail_setup(state, state.setups[action.stage], reason, decision.at, actions)
            continue
        ls = state.layers[layer_key(action.stage, action.layer)]
        ls.phase, ls.timing.finished_at = Phase.FAILED, decision.at
        ls.failure_reason = f"rejected: {refusals[action.job_name]}"
        close_layer(ls)
        fix = f"correct the config, then `pipeline submit {state.run_id} {ls.stage} {ls.layer}`"
        details = {"reason": ls.failure_reason, "fix": fix}
        actions.append(Alert("layer_failed", ls.stage, ls.layer, details))
    return replace(decision, state=state, actions=actions, changed=True)


def _state_differs(before: RunState, after: RunState) -> bool:
    return before.run_doc() != after.run_doc() or any(
        before.layers[k].to_doc() != after.layers[k].to_doc() for k in after.layers
    )
