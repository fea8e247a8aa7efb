"""The decision finished once the API server has checked its Jobs: what `decide` cannot know
before the reconcile's dry-run. Pure module (docs/controller.md).

`finish` takes back every refused Job creation (`decide.reject`), records the config version of
right-sized requests (`rightsize_version`), and counts the reconcile's own use of Firestore,
Pub/Sub, Logging and function time (shared.money.controller_usage): onto the run document when
the decision commits, else pending for the next one that does. The reconciler then only
commits, acts and publishes what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.model.state import RunState
from shared.money.controller_usage import ControllerUsage, reconcile_usage
from shared.reconcile.decide import reject
from shared.reconcile.decision import Alert, Decision
from shared.reconcile.rightsize_version import with_rightsize_version


@dataclass(frozen=True)
class Finished:
    """The finished decision, and the run's usage counted since its last commit, this
    reconcile's included: what a changing decision carries onto the run document (the caller
    clears it once that commit went through, and keeps it for the next attempt if it lost)."""

    decision: Decision
    pending_usage: ControllerUsage


def finish(
    run: RunState,
    decision: Decision,
    refusals: dict[str, str],
    pending_usage: ControllerUsage,
    busy_s: float,
    log_bytes: int,
) -> Finished:
    """`decision` (decided from `run`) with the dry-run's `refusals` (Job name -> why) taken
    back and right-sized requests versioned; this reconcile's usage (`busy_s` of wall time,
    `log_bytes` logged for the run) added to `pending_usage`, which a changing decision
    carries onto the run document."""
    decision = with_rightsize_version(reject(decision, refusals))
    pending = pending_usage + usage_of(run, decision, busy_s, log_bytes)
    if decision.changed:
        decision.state.controller_usage = (
            ControllerUsage.from_doc(run.controller_usage) + pending
        ).to_doc()
    return Finished(decision, pending)


def usage_of(run: RunState, decision: Decision, busy_s: float, log_bytes: int) -> ControllerUsage:
    """One reconcile's use as counted from its decision: the layer documents read, the ones
    its commit writes (changed layers, pod-record pages, outbox alerts), its messages."""
    state = decision.state
    changed = sum(
        run.layers[k].to_doc() != ls.to_doc() for k, ls in state.layers.items() if k in run.layers
    )
    return reconcile_usage(
        len(run.layers),
        decision.changed,
        changed,
        sum(len(v) for v in decision.pod_records.values()),
        sum(isinstance(a, Alert) for a in decision.actions),
        busy_s,
        log_bytes,
    )
