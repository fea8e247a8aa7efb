"""The decision finished after the dry-run (shared.reconcile.finish): refusals taken back,
and the reconcile's own usage pending until a changing decision carries it onto the run."""

from __future__ import annotations

import copy

from shared.model.phase import Phase
from shared.money.controller_usage import ControllerUsage
from shared.reconcile.decision import Alert, CreateJob, Decision
from shared.reconcile.finish import finish
from tests.builders.decide_runs import make_run
from tests.builders.pod_infos import T0

EARLIER = ControllerUsage(reconciles=2, busy_s=1.5, reads=6, writes=0, messages=2, log_bytes=10)


def test_an_unchanged_decision_keeps_its_usage_pending_and_off_the_run() -> None:
    run = make_run()
    finished = finish(run, Decision(copy.deepcopy(run), [], T0), {}, EARLIER, 0.5, 7)
    assert finished.decision.state.controller_usage == run.controller_usage
    pending = finished.pending_usage
    assert (pending.reconciles, pending.busy_s, pending.log_bytes) == (3, 2.0, 17)
    assert pending.writes == 0  # nothing committed


def test_a_changing_decision_carries_the_pending_usage_onto_the_run() -> None:
    run = make_run()
    run.controller_usage = ControllerUsage(reconciles=5).to_doc()
    state = copy.deepcopy(run)
    state.layers["ingest-L2"].phase = Phase.RUNNING
    decision = Decision(state, [Alert("approval_needed", "ingest", 2)], T0, changed=True)
    finished = finish(run, decision, {}, EARLIER, 0.5, 7)
    stored = ControllerUsage.from_doc(finished.decision.state.controller_usage)
    assert stored == ControllerUsage(reconciles=5) + finished.pending_usage
    assert stored.reconciles == 8 and stored.writes == 1 + 1 + 1  # run, one layer, one alert


def test_a_refused_creation_is_taken_back_before_the_usage_is_counted() -> None:
    run = make_run()
    state = copy.deepcopy(run)
    ls = state.layers["ingest-L2"]
    ls.phase, ls.job.name = Phase.RUNNING, "job-l2"
    decision = Decision(state, [CreateJob("ingest", 2, "job-l2", 1)], T0, changed=True)
    finished = finish(run, decision, {"job-l2": "image: Required value"}, ControllerUsage(), 0, 0)
    assert finished.decision.state.layers["ingest-L2"].phase is Phase.FAILED
    (alert,) = finished.decision.actions
    assert isinstance(alert, Alert) and alert.kind == "layer_failed"
    assert finished.pending_usage.messages == 1 + 1  # the trigger and the layer_failed alert
