"""Operator actions as mutations of a run's state. Pure: the CLI applies them through
`RunStore.update_run` (a precondition on the run's version) and then kicks the controller.
"""

from __future__ import annotations

from datetime import datetime

from shared.model.phase import Phase, RunStatus
from shared.model.state import SETUP_LAYER, JobAttempt, LayerState, RunState, SetupState, layer_key
from shared.reconcile.oom import next_memory_factor


class ActionError(ValueError):
    """The action does not apply to this run (the message says why and what to do)."""


def layer_of(run: RunState, stage: str, layer: int) -> LayerState:
    """The run's layer, or ActionError listing the layers the run has."""
    ls = run.layers.get(layer_key(stage, layer))
    if ls is None:
        known = ", ".join(f"{s} L2-L{run.top_layers[s]}" for s in run.stages)
        setups = f"; its setup passes: {', '.join(run.setups)} 0" if run.setups else ""
        raise ActionError(
            f"run {run.run_id} has no layer {stage} L{layer} (it has: {known}{setups})"
        )
    return ls


def setup_of(run: RunState, stage: str) -> SetupState:
    """The stage's setup pass (`LAYER` 0), or ActionError naming the stages that have one."""
    setup = run.setups.get(stage)
    if setup is None:
        known = ", ".join(run.setups) or "none"
        raise ActionError(
            f"run {run.run_id} has no setup pass for stage {stage!r} (stages with one: {known})"
        )
    return setup


def approve(
    run: RunState, stage: str, layers: list[int] | None, by: str, now: datetime
) -> list[str]:
    """Set the approval flag of the given layers (all not yet started, if None)."""
    if stage not in run.stages:
        raise ActionError(f"run {run.run_id} has no stage {stage!r} (it has: {run.stages})")
    if layers:
        missing = [n for n in layers if layer_key(stage, n) not in run.layers]
        if missing:
            raise ActionError(
                f"run {run.run_id}: {stage} has no layer {missing} "
                f"(it has: {stage} L2-L{run.top_layers[stage]})"
            )
        targets = [run.layers[layer_key(stage, n)] for n in layers]
    else:
        targets = [
            ls for ls in run.ordered_layers() if ls.stage == stage and ls.phase == Phase.WAITING
        ]
    for ls in targets:
        if not ls.approval.granted:
            ls.approval.granted, ls.approval.by, ls.approval.at = True, by, now
    return [ls.key for ls in targets]


def pause(run: RunState) -> None:
    if run.status != RunStatus.RUNNING:
        raise ActionError(f"run {run.run_id} is {run.status}, not running")
    run.status = RunStatus.PAUSED


def resume(run: RunState) -> None:
    if run.status != RunStatus.PAUSED:
        raise ActionError(f"run {run.run_id} is {run.status}, not paused")
    run.status = RunStatus.RUNNING


def scale(run: RunState, stage: str, layer: int, parallelism: int | None) -> None:
    """Pin a layer's parallelism (None hands it back to the ramp)."""
    if parallelism is not None and parallelism < 1:
        raise ActionError(f"parallelism must be >= 1, got {parallelism}")
    layer_of(run, stage, layer).job.scale_override = parallelism


def cancel(run: RunState, stage: str, layer: int, by: str, now: datetime) -> None:
    """Stop a layer: its Job and pods are deleted, the layer is failed (re-submit to redo)."""
    ls = layer_of(run, stage, layer)
    if ls.phase not in (Phase.RUNNING, Phase.FAILED):
        raise ActionError(f"{ls.key} is {ls.phase}: only a running or failed layer has a Job")
    if ls.phase == Phase.RUNNING:
        ls.phase, ls.timing.finished_at = Phase.FAILED, now
        ls.failure_reason = f"deleted by {by}"
    ls.job.delete_requested = True


def resubmit(
    run: RunState,
    stage: str,
    layer: int,
    by: str,
    now: datetime,
    oom_memory_factor: float | None = None,
) -> None:
    """Start a failed layer again as a new Job; done chunks are skipped by the workers. With
    `oom_memory_factor` (job.oom_memory_factor) and OOM kills in the failed attempt, the new
    one asks for that much more memory (shared.reconcile.oom). Layer 0 is the stage's setup pass."""
    if layer == SETUP_LAYER:
        _resubmit_setup(run, stage)
        return
    ls = layer_of(run, stage, layer)
    if ls.phase != Phase.FAILED:
        raise ActionError(f"{ls.key} is {ls.phase}: only a failed layer can be re-submitted")
    fresh = _next_attempt(ls, by, now)
    # The old Job's pods may still be finishing (a `pipeline delete` not yet carried out, or
    # pods in their grace period): the new Job waits for them, and a pending delete is kept.
    fresh.job.retire_delete = ls.job.delete_requested or ls.job.retire_delete
    fresh.faults.memory_factor = next_memory_factor(ls, oom_memory_factor)
    run.layers[ls.key] = fresh
    if run.status == RunStatus.FAILED:
        run.status = RunStatus.RUNNING


def replace_running(run: RunState, stage: str, layer: int, by: str, now: datetime) -> None:
    """Replace a running layer's Job at once (`pipeline apply` with drift in what its pods
    build, shared.operate.layer_drift): the layer becomes a new attempt, approved, whose Job
    the controller creates once the running one is deleted and its pods are gone; its
    workers skip the chunks already done. Its canary's sizing and memory factor are kept (the
    new attempt replaces, it did not fail)."""
    ls = layer_of(run, stage, layer)
    if ls.phase != Phase.RUNNING:
        raise ActionError(f"{ls.key} is {ls.phase}: only a running layer's Job is replaced")
    fresh = _next_attempt(ls, by, now)
    fresh.job.retire_delete = True
    fresh.job.scale_override = ls.job.scale_override
    fresh.faults.memory_factor = ls.faults.memory_factor
    fresh.canary = ls.canary
    run.layers[ls.key] = fresh


def _next_attempt(ls: LayerState, by: str, now: datetime) -> LayerState:
    """The layer's next attempt, approved by `by`, retiring the current Job (its costs kept)."""
    fresh = LayerState(stage=ls.stage, layer=ls.layer, job=JobAttempt(attempt=ls.job.attempt + 1))
    fresh.job.retire_job = ls.job.name or ls.job.retire_job
    _carry_costs(ls, fresh)
    fresh.approval.granted, fresh.approval.by, fresh.approval.at = True, by, now
    return fresh


def _resubmit_setup(run: RunState, stage: str) -> None:
    setup = setup_of(run, stage)
    if setup.phase != Phase.FAILED:
        raise ActionError(f"the {stage} setup is {setup.phase}: only a failed one can be re-run")
    # The failed attempt's pod ran: its span is priced with the next (costs never vanish).
    earlier = setup.span_s(setup.finished_at or setup.started_at or run.created_at)
    run.setups[stage] = SetupState(stage=stage, attempt=setup.attempt + 1, earlier_s=earlier)
    if run.status == RunStatus.FAILED:
        run.status = RunStatus.RUNNING


def _carry_costs(old: LayerState, fresh: LayerState) -> None:
    """Keep what earlier attempts cost (the budget guard and `pipeline costs` count every
    attempt). Usage accrued by pods still open is closed into the totals: the new attempt's
    accounting starts from its own pods and would never close the old ones."""
    fresh.pods.cpu_seconds = old.pods.cpu_seconds + old.pods.running_cpu_seconds
    fresh.pods.memory_gib_seconds = (
        old.pods.memory_gib_seconds + old.pods.running_memory_gib_seconds
    )
    fresh.pods.succeeded = old.pods.succeeded
    fresh.pods.failed = old.pods.failed
    fresh.pods.preempted = old.pods.preempted
    fresh.faults.hung = old.faults.hung
    fresh.pods.succeeded_runtime_s = old.pods.succeeded_runtime_s
    fresh.pods.cpu_request, fresh.pods.memory_request_gib = (
        old.pods.cpu_request,
        old.pods.memory_request_gib,
    )


class ActiveRunError(ActionError):
    """Another run of the same graph is still active (two runs would race on one table)."""


ACTIVE_STATUSES = (RunStatus.RUNNING, RunStatus.PAUSED)


def guard_one_active(
    run: RunState, others: list[RunState], force: bool, by: str, now: datetime, why: str
) -> None:
    """Refuse a second active run of `run.graph_id` (ActiveRunError naming the other runs
    and `--force`); with `force`, record on `run` who started it past which runs, when and
    why. `others` are the store's runs of the graph (any status: finished ones pass)."""
    active = sorted(
        o.run_id for o in others if o.status in ACTIVE_STATUSES and o.run_id != run.run_id
    )
    if not active:
        return
    if not force:
        raise ActiveRunError(
            f"graph {run.graph_id} already has an active run: {', '.join(active)} "
            f"(see `pipeline status {active[0]}`); two runs of one graph race on its table. "
            f"Wait for it to end; or stop it (`pipeline pause {active[0]}`, then `pipeline "
            f"purge {active[0]}` removes its records and leaves its Jobs); or start anyway "
            "with --force (recorded on the new run)"
        )
    run.forced_start = {"by": by, "at": now, "why": why or "--force", "past_runs": active}
