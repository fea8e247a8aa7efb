"""A re-submitted layer never overlaps the Job before it: its pods start only once the earlier
Job's pods are finished or gone, a pending `pipeline delete` survives the submit, and the new
Job's claims have lineages of their own (no takeover of the old pods' live claims)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.config.config_files import load_config
from shared.jobs.manifest import render_job
from shared.model.worker_contract import JOB_ATTEMPT, WorkerEnv
from shared.operate import operator_actions as ops
from shared.reconcile.decide import decide
from shared.reconcile.decision import CreateJob, DeleteJob, Snapshot
from tests.builders.decide_runs import T0, job, make_run, name_for, plans
from tests.builders.pod_infos import pod_info
from tests.builders.stored_runs import DEMO
from worker.claim_tokens import lineage


def failed_then_resubmitted(delete: bool):
    """ingest-L2 ran as attempt 0 and failed (deleted by the operator when `delete`), then was
    re-submitted before any reconcile carried the delete out."""
    run = make_run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.timing.submitted_at = "running", name_for(ls), T0
    old = ls.job.name
    if delete:
        ops.cancel(run, "ingest", 2, "ana", T0)
    else:
        ls.phase = "failed"
    ops.resubmit(run, "ingest", 2, "ana", T0)
    return run, old


def step(run, jobs, pods, at=T0):
    decision = decide(Snapshot(run, jobs, pods), plans(run), None, at + timedelta(seconds=5))
    creates = [a for a in decision.actions if isinstance(a, CreateJob)]
    deletes = [a.job_name for a in decision.actions if isinstance(a, DeleteJob)]
    return decision.state, creates, deletes


def test_a_submit_right_after_a_delete_keeps_the_delete_and_waits_for_the_pods():
    run, old = failed_then_resubmitted(delete=True)
    fresh = run.layers["ingest-L2"]
    assert (fresh.job.attempt, fresh.job.retire_job, fresh.job.retire_delete) == (1, old, True)

    running = [pod_info("a", job_name=old), pod_info("b", job_name=old, index=1)]
    # The old Job is still there: it is deleted, nothing new starts.
    state, creates, deletes = step(run, {old: job(old, active=2)}, {old: running})
    assert (creates, deletes) == ([], [old])
    # Deleted, but its pods are in their grace period: still nothing new, no second delete.
    state, creates, deletes = step(state, {old: None}, {old: running})
    assert (creates, deletes) == ([], [])
    # One pod finished, one still shutting down: wait.
    finishing = [pod_info("a", "Failed", job_name=old), running[1]]
    state, creates, deletes = step(state, {old: None}, {old: finishing})
    assert creates == []
    # All gone: the new attempt's Job starts, and the record is cleared.
    state, creates, deletes = step(state, {old: None}, {old: []})
    assert [c.job_name for c in creates] == [name_for(state.layers["ingest-L2"])] != [old]
    assert (
        state.layers["ingest-L2"].job.retire_job,
        state.layers["ingest-L2"].job.retire_delete,
    ) == (
        "",
        False,
    )


def test_a_failed_job_whose_pods_are_finished_is_not_waited_for():
    run, old = failed_then_resubmitted(delete=False)
    done = [pod_info("a", "Failed", job_name=old), pod_info("b", "Succeeded", job_name=old)]
    _, creates, deletes = step(run, {old: job(old, condition="Failed")}, {old: done})
    assert deletes == [] and len(creates) == 1


def test_a_failed_job_with_a_pod_still_running_is_waited_for_and_kept():
    """Submit while the old Job's pods still run (a Job failed by maxFailedIndexes terminates
    its pods with a grace period): no overlap, and the Job is not deleted (only asked)."""
    run, old = failed_then_resubmitted(delete=False)
    pods = [pod_info("a", "Failed", job_name=old), pod_info("b", job_name=old, index=1)]
    _, creates, deletes = step(run, {old: job(old, condition="Failed")}, {old: pods})
    assert (creates, deletes) == ([], [])


@pytest.mark.parametrize("attempt", [1, 2, 7])
def test_each_job_attempt_has_lineages_of_its_own(attempt):
    base = lineage("g", "ingest", 3, "r1", 5)
    assert lineage("g", "ingest", 3, "r1", 5, 0) == base  # attempt 0: as before (compatible)
    assert lineage("g", "ingest", 3, "r1", 5, attempt) != base
    assert lineage("g", "ingest", 3, "r1", 5, attempt) != lineage("g", "ingest", 3, "r1", 5, 9)


def test_the_job_of_a_resubmit_tells_its_pods_the_attempt():
    cfg = load_config(DEMO)

    def env(attempt: int) -> dict[str, str]:
        manifest = render_job(cfg, "ingest", 2, run_id="r1", parallelism=1, attempt=attempt)
        container = manifest["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e["value"] for e in container["env"] if "value" in e}

    assert JOB_ATTEMPT not in env(0)
    third = env(3)
    assert third[JOB_ATTEMPT] == "3"
    assert WorkerEnv.from_env({**third, "JOB_COMPLETION_INDEX": "0"}).job_attempt == 3
