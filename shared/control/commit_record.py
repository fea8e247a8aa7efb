"""What a reconcile commits besides the new state: the outbox entries of its alerts and the
pod attempts it recorded. Pure module (docs/controller.md): the commit step writes this record
with the state, under the precondition on the run's version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.config.config import PipelineConfig
from shared.control.alerts import alert_body, claim_lost_check
from shared.reconcile.decision import Alert, Decision, Plan

CLAIM_LOST_PODS = 20  # newly failed pods one reconcile has checked for a lost chunk claim


@dataclass(frozen=True)
class CommitRecord:
    """The outbox entries (alert bodies) and the pod attempt docs by layer key."""

    alerts: list[dict[str, Any]] = field(default_factory=list)
    pod_records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Config history entries (shared.reconcile.rightsize_version), as `pipeline apply` records them.
    config_versions: list[dict[str, Any]] = field(default_factory=list)


def commit_record(cfg: PipelineConfig, plan: Plan, decision: Decision) -> CommitRecord:
    """The record of `decision` (its run's config `cfg`, the plan it was decided by): a body
    per alert action, a `claim_lost` check per layer with pods newly failed transient, and
    the pod records, and the config versions it records."""
    state = decision.state
    alerts = [
        alert_body(cfg, state, a, decision.at, plan.layers)
        for a in decision.actions
        if isinstance(a, Alert)
    ]
    alerts += claim_lost_checks(decision)
    records = {k: [r.to_doc() for r in v] for k, v in decision.pod_records.items()}
    return CommitRecord(alerts, records, list(decision.config_versions))


def claim_lost_checks(decision: Decision, budget: int = CLAIM_LOST_PODS) -> list[dict[str, Any]]:
    """A `claim_lost` check per layer whose pods were newly recorded as failed transient
    (exit 1: the worker's code for a lost claim among others), at most `budget` pods in all.
    Committed with the pod records, so each pod is checked once; its logs are read when the
    check is published (shared.control.outbox)."""
    out = []
    for key, records in decision.pod_records.items():
        ls = decision.state.layers[key]
        pods = []
        for rec in records:
            if rec.phase != "Failed" or rec.exit_code != 1 or budget <= 0:
                continue
            budget -= 1
            pods.append((rec.name, rec.index))
        if pods:
            out.append(
                claim_lost_check(decision.state, ls.stage, ls.layer, ls.job.name, pods, decision.at)
            )
    return out
