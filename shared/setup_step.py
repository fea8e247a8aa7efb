"""A stage's setup pass in the reconcile: created once the stages it waits for are complete,
succeeded when its Job completes with graph metadata that fits the planned grid, failed with a
`setup_failed` alert otherwise. Pure module (called by `shared.reconcile.decide`).
"""

from __future__ import annotations

from datetime import datetime

from shared.decision import Action, Alert, CreateJob, SetupPlan, Snapshot
from shared.graph_meta import GraphMetaError, mismatch, parse_report
from shared.ownership import foreign_owner
from shared.state import SETUP_LAYER, RunState, SetupState


def setup_step(
    run: RunState,
    setup: SetupState,
    sp: SetupPlan,
    seen: Snapshot,
    now: datetime,
    out: list[Action],
) -> None:
    """A stage's setup pass: created once the stages it waits for are complete; succeeded
    when its Job completes and the graph metadata it reports (if any) fits the planned grid;
    failed (with a `setup_failed` alert carrying the pod's log tail) otherwise."""
    if setup.phase == "waiting":
        if run.status == "running" and run.stage_may_begin(setup.stage):
            setup.phase, setup.job_name, setup.started_at = "running", sp.job_name, now
            out.append(CreateJob(setup.stage, SETUP_LAYER, sp.job_name, 1))
        return
    if setup.phase != "running":
        return
    job = seen.jobs.get(setup.job_name)
    if job is None:  # committed but not created (or deleted by hand): create it again
        out.append(CreateJob(setup.stage, SETUP_LAYER, setup.job_name, 1))
        return
    reason = foreign_owner(job, run, setup)  # type: ignore[arg-type]
    if reason is None and job.condition == "Complete":
        try:
            meta = parse_report(seen.setup_logs.get(setup.job_name, ""))
        except GraphMetaError as e:
            reason = f"the setup reported malformed graph metadata: {e}"
        else:
            reason = mismatch(meta, sp.layer2_shape, sp.layer_count) if meta else ""
            if not reason:
                setup.phase, setup.finished_at = "succeeded", job.completion_time or now
                return
    elif reason is None and job.condition == "Failed":
        reason = f"the setup pod failed ({job.reason or 'Failed'})"
    if reason is None:
        return  # still running
    fail_setup(run, setup, reason, now, out)


def fail_setup(
    run: RunState, setup: SetupState, reason: str, now: datetime, out: list[Action]
) -> None:
    """Fail a stage's setup pass: its layers stay waiting; the alert names the re-submit."""
    setup.phase, setup.finished_at, setup.failure_reason = "failed", now, reason
    fix = f"fix the cause, then `pipeline submit {run.run_id} {setup.stage} {SETUP_LAYER}`"
    details = {"reason": reason, "job": setup.job_name, "fix": fix}
    out.append(Alert("setup_failed", setup.stage, SETUP_LAYER, details))
