"""Which Jobs a run may adopt. Job names are deterministic, so a Job found under a planned
name may be a leftover: of a purged run of the same id, or another tool's. The controller
stamps each Job it creates with its run (full id, creation time) and the layer's attempt,
and adopts a Job only if those name this run and attempt. Pure module.
"""

from __future__ import annotations

import copy
from typing import Any

from shared.jobs.manifest import PREFIX, label_value
from shared.model.state import LayerState, RunState, SetupState
from shared.ports.cluster import JobStatus

RUN_LABEL = PREFIX + "run"
RUN_ID = PREFIX + "run-id"
ATTEMPT = PREFIX + "attempt"
RUN_CREATED = PREFIX + "run-created"


def _attempt(ls: LayerState | SetupState) -> int:
    """The attempt a layer's (or a stage's setup pass's) Job belongs to."""
    return ls.attempt if isinstance(ls, SetupState) else ls.job.attempt


def owner_marks(run: RunState, ls: LayerState | SetupState) -> dict[str, str]:
    """The annotations naming the run incarnation and attempt that own a layer's Job."""
    marks = {RUN_ID: run.run_id, ATTEMPT: str(_attempt(ls))}
    if run.created_at is not None:
        marks[RUN_CREATED] = run.created_at.isoformat()
    return marks


def stamped(manifest: dict[str, Any], run: RunState, ls: LayerState | SetupState) -> dict[str, Any]:
    """A copy of `manifest` carrying the owner marks of `ls`'s attempt in `run`."""
    out = copy.deepcopy(manifest)
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), **owner_marks(run, ls)}
    return out


def foreign_owner(job: JobStatus, run: RunState, ls: LayerState | SetupState) -> str | None:
    """Why `job` (found under `ls`'s Job name) is not this attempt's, or None if it is. Each
    mark the Job carries must name this run and attempt; a mark it lacks is not held against
    it (Jobs created before the marks existed, simulated clusters)."""
    label = job.labels.get(RUN_LABEL)
    if label is not None and label != label_value(run.run_id):
        return _reason(job, run, ls, f"run {job.annotations.get(RUN_ID, label)}")
    for key, want in owner_marks(run, ls).items():
        have = job.annotations.get(key)
        if have is None or have == want:
            continue
        if key == RUN_ID:
            return _reason(job, run, ls, f"run {have}")
        if key == ATTEMPT:
            return _reason(job, run, ls, f"attempt {have} of run {run.run_id}")
        return _reason(job, run, ls, f"an earlier run {run.run_id} (created {have})")
    return None


def _reason(job: JobStatus, run: RunState, ls: LayerState | SetupState, owner: str) -> str:
    return (
        f"Job {job.name} belongs to {owner}, not to attempt {_attempt(ls)} of run "
        f"{run.run_id}: delete it (kubectl delete job {job.name}) or purge that run, then "
        f"`pipeline submit {run.run_id} {ls.stage} {ls.layer}`"
    )
