"""A stage's setup pass in the reconcile: created once the stages it waits for are complete,
succeeded when its Job completes and the graph's table holds the graph's metadata (fitting
the planned grid when it can be read), failed with a `setup_failed` alert otherwise. Pure
module (called by `shared.reconcile.decide.decide`; docs/setup-passes.md).

Before PyChunkedGraph's ingest setup starts, the graph's table as observed decides its
command: absent, plain (it creates table and metadata); holding the graph's metadata, with
`--exist-ok` (the plan renders it so); present without metadata, refused, since that setup
would fail "already exists" and with `--exist-ok` would skip writing the metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from shared.config.config import PipelineConfig
from shared.config.stage_selection import runs_pcg_ingest_setup
from shared.model.graph_meta import GraphMetaError, mismatch, parse_report
from shared.model.phase import Phase, RunStatus
from shared.model.state import SETUP_LAYER, RunState, SetupState
from shared.ports.cluster import JobStatus
from shared.ports.graph_table import GraphTable, TableState, delete_table_fix, describe
from shared.reconcile.decision import Action, Alert, ApplyConfigMap, CreateJob, SetupPlan, Snapshot
from shared.reconcile.ownership import foreign_owner


def may_start(run: RunState, setup: SetupState) -> bool:
    """Whether a waiting setup pass may be created now: the run is running and every stage
    it waits for is complete."""
    return (
        setup.phase == Phase.WAITING
        and run.status == RunStatus.RUNNING
        and run.stage_may_begin(setup.stage)
    )


def needs_graph_table(
    run: RunState, cfg: PipelineConfig, jobs: Mapping[str, JobStatus | None]
) -> bool:
    """Whether a reconcile must read the graph's table (`Snapshot.graph_table`), given the
    observed Jobs of the running setups: one completed (its end is judged by the table), or
    PyChunkedGraph's ingest setup is about to be created, first or again (the table decides
    its command). A setup pod still at work needs no read."""

    def needs(s: SetupState) -> bool:
        if s.phase == Phase.RUNNING:
            job = jobs.get(s.job_name)
            if job is not None:
                return job.condition == "Complete"
        elif not may_start(run, s):
            return False
        return runs_pcg_ingest_setup(cfg, s.stage)

    return any(needs(s) for s in run.setups.values())


def setup_step(
    run: RunState,
    setup: SetupState,
    sp: SetupPlan,
    seen: Snapshot,
    now: datetime,
    out: list[Action],
) -> None:
    """A stage's setup pass: created once the stages it waits for are complete (an image's
    ingest setup only on a table it can set up); succeeded when its Job completes and the
    graph's table holds the graph's metadata, which must fit the planned grid where it can
    be read (this project's record in the table, else a line in the pod's log); failed
    (with a `setup_failed` alert carrying the pod's log tail) otherwise."""
    table = seen.graph_table
    if setup.phase == Phase.WAITING:
        if not may_start(run, setup):
            return
        if sp.pcg_ingest:
            if table is None:
                return  # the table is read on the next reconcile
            if table.state is TableState.NO_METADATA:
                refuse_empty_table(run, setup, sp, table, now, out)
                return
        setup.phase, setup.job_name, setup.started_at = Phase.RUNNING, sp.job_name, now
        _create(setup, sp, out)
        return
    if setup.phase != Phase.RUNNING:
        return
    job = seen.jobs.get(setup.job_name)
    if job is None:  # committed but not created (or deleted by hand): create it again
        _create(setup, sp, out)
        return
    reason = foreign_owner(job, run, setup)
    if reason is None and job.condition == "Complete":
        if table is None:
            return  # judged once the table is read
        reason = completed_setup_problem(sp, table, seen.setup_logs.get(setup.job_name, ""))
        if not reason:
            setup.phase, setup.finished_at = Phase.SUCCEEDED, job.completion_time or now
            return
    elif reason is None and job.condition == "Failed":
        reason = f"the setup pod failed ({job.reason or 'Failed'})"
    if reason is None:
        return  # still running
    fail_setup(run, setup, reason, now, out)


def _create(setup: SetupState, sp: SetupPlan, out: list[Action]) -> None:
    """Create the setup's Job, after the run's dataset ConfigMap its pod mounts."""
    if sp.config_map is not None:
        out.append(ApplyConfigMap(setup.job_name, sp.config_map))
    out.append(CreateJob(setup.stage, SETUP_LAYER, setup.job_name, 1))


def completed_setup_problem(sp: SetupPlan, table: GraphTable, log_text: str) -> str:
    """Why a completed setup did not set the graph up, or "" if it did: the graph's metadata
    must be in its table (whatever the setup printed), and fit the planned grid where it can
    be read: this project's record in the table (what our workers read), else a
    `graph_meta` line in the pod's log (an image's own reading, which the graph probe of an
    image's setup must print)."""
    if not table.has_metadata:
        return (
            f"the setup completed but {describe(table, sp.project, sp.instance)}: the stage's "
            "workers read the graph from there, so its setup did not set the graph up"
        )
    meta = table.meta
    if meta is None:
        try:
            meta = parse_report(log_text)
        except GraphMetaError as e:
            return f"the setup reported malformed graph metadata: {e}"
        if meta is None and sp.probes_graph:
            return (
                "the setup completed but its graph probe reported no graph metadata (no "
                "graph_meta line in the pod's log), so the grid the image iterates is unknown"
            )
    return mismatch(meta, sp.layer2_shape, sp.layer_count, sp.fanout) if meta else ""


def refuse_empty_table(
    run: RunState,
    setup: SetupState,
    sp: SetupPlan,
    table: GraphTable,
    now: datetime,
    out: list[Action],
) -> None:
    """Fail an image's ingest setup before it starts: its table exists without the graph's
    metadata, which that setup can neither create ("already exists") nor fill (`--exist-ok`
    skips the graph). The fix names the table to delete."""
    reason = (
        f"{describe(table, sp.project, sp.instance)}: PyChunkedGraph's ingest setup would fail "
        "on it (already exists), and with --exist-ok would skip writing the metadata, so "
        "every layer-2 pod would fail reading the graph. Nothing in the table is a graph yet "
        "(an empty create, e.g. by an older `pipeline setup`, or a setup that died midway)"
    )
    fix = (
        f"{delete_table_fix(table.table_id, sp.project, sp.instance)}, then "
        f"`pipeline submit {run.run_id} {setup.stage} {SETUP_LAYER}`"
    )
    fail_setup(run, setup, reason, now, out, fix)


def fail_setup(
    run: RunState,
    setup: SetupState,
    reason: str,
    now: datetime,
    out: list[Action],
    fix: str = "",
) -> None:
    """Fail a stage's setup pass: its layers stay waiting; the alert names the re-submit."""
    setup.phase, setup.finished_at, setup.failure_reason = Phase.FAILED, now, reason
    fix = fix or f"fix the cause, then `pipeline submit {run.run_id} {setup.stage} {SETUP_LAYER}`"
    details = {"reason": reason, "job": setup.job_name, "fix": fix}
    out.append(Alert("setup_failed", setup.stage, SETUP_LAYER, details))
