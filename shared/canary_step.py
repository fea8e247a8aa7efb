"""The canary's part of a reconcile (shared.canary decides; this module turns its answer into
the reconcile's actions). Pure."""

from __future__ import annotations

from datetime import datetime

from shared.autopilot import Requests
from shared.canary import canary_holds
from shared.decision import Action, Alert, CreateJob, LayerPlan, Snapshot
from shared.state import LayerState


def canary_step(
    ls: LayerState, lp: LayerPlan, seen: Snapshot, now: datetime, out: list[Action]
) -> bool:
    """Whether the layer's canary holds it back this reconcile (its Job created or awaited,
    or its size just changed); appends the canary's Job creation or alert to `out`."""
    if lp.canary is None:
        return False
    name = ls.canary_job or lp.canary.job_name
    holds, todo = canary_holds(
        ls,
        lp.canary,
        seen.jobs.get(name),
        seen.pods.get(name, []),
        Requests(lp.cpu, lp.memory_gib),
        now,
        seen.canary_logs,
    )
    for kind, what in todo:
        if kind == "create":
            job_name, parallelism = what
            out.append(CreateJob(ls.stage, ls.layer, job_name, parallelism))
        else:
            alert, details = what
            out.append(Alert(alert, ls.stage, ls.layer, details))
    return holds
