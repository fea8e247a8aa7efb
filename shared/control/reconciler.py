"""The reconcile loop: observe -> plan -> decide (and forecast an ended canary) -> dry-run ->
finish -> commit -> act -> publish, for one run (docs/controller.md).

`Reconciler.reconcile(run_id)` is idempotent and safe to run concurrently for one run: the
new state is committed under a precondition on the run's version before any side effect, Job
names are deterministic (a second create is a no-op), parallelism patches are absolute, and
alerts go through the outbox in the same commit, so none is lost and none is sent twice.

I/O happens in observe (store and cluster reads, shared.control.observe), dry-run (the API server's
check of each Job to create), the commit's one conditional write, act (the cluster) and
publish (the outbox, shared.control.outbox). Plan (shared.reconcile.build_plan), decide
(shared.reconcile.decide), the canary's forecast (shared.forecast.canary_forecast), finish (the
refusals taken back, the right-size version, the reconcile's usage: shared.reconcile.finish) and
the commit record (shared.control.commit_record) are pure.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from shared.control.build_metrics import progress_entries
from shared.control.commit_record import CommitRecord, commit_record
from shared.control.controller_log import log_json, take_log_bytes
from shared.control.observe import Observation, Observer
from shared.control.outbox import Outbox
from shared.forecast.canary_forecast import with_canary_forecasts
from shared.jobs.manifest import for_create, graph_scope
from shared.model.state import SETUP_LAYER, layer_key
from shared.money.controller_usage import ControllerUsage
from shared.money.pricing import RateRow
from shared.ports.cluster import JobWriter, ManifestRejectedError, ResizeOutcome
from shared.ports.run_store import RunRecords, StaleStateError
from shared.reconcile.build_plan import plan_for
from shared.reconcile.decide import decide
from shared.reconcile.decision import (
    ApplyConfigMap,
    CreateJob,
    Decision,
    DeleteJob,
    DeletePod,
    PatchJob,
    Plan,
    ResizePod,
)
from shared.reconcile.finish import finish
from shared.reconcile.ownership import stamped

log = logging.getLogger("cave_pipeline.controller")

STALE_RETRIES = 5  # reconciles of one run that may lose the commit race before giving up


@dataclass
class ReconcileResult:
    run_id: str
    status: str
    actions: int
    stale_retries: int
    # Wall seconds of the committing attempt's steps (observe, decide, commit, act), for its
    # log line: where a slow advance's seconds went.
    step_s: dict[str, float] = field(default_factory=dict)


class Reconciler:
    """Reconciles one run at a time against the cluster; every port is injected. `rates`:
    the Autopilot rate table the budget guard prices with."""

    def __init__(
        self,
        runs: RunRecords,
        cluster: JobWriter,
        observer: Observer,
        outbox: Outbox,
        rates: tuple[RateRow, ...],
    ) -> None:
        self.runs, self.cluster, self.observer, self.outbox = runs, cluster, observer, outbox
        self.rates = rates
        # Each run's usage counted since its last commit (shared.money.controller_usage).
        self._usage_pending: dict[str, ControllerUsage] = {}

    def reconcile(self, run_id: str) -> ReconcileResult:
        """Bring one run one step closer to done. Safe to call any number of times; decides
        again from a fresh observation when the run moved on before the commit, and runs one
        more pass at once when the decision asks for it (`Decision.again`: a canary resized
        its layer, whose Job the next pass plans), instead of leaving it to the next trigger."""
        result, again = self._reconcile_once(run_id)
        if again:
            follow = self._reconcile_once(run_id)[0]
            steps = {k: round(v + follow.step_s.get(k, 0.0), 3) for k, v in result.step_s.items()}
            result = replace(follow, actions=result.actions + follow.actions, step_s=steps)
        return result

    def _reconcile_once(self, run_id: str) -> tuple[ReconcileResult, bool]:
        """One pass of the loop; with whether the decision asked for another one."""
        for attempt in range(STALE_RETRIES):
            started = time.monotonic()  # the reconcile's wall time, for its own bill
            obs = self.observer.observe(run_id)
            observed = time.monotonic()
            plan = plan_for(obs.cfg, obs.seen.run, obs.seen.graph_table)
            decision = decide(obs.seen, plan, self.rates, obs.now)
            # The simulator drives decide, so it forecasts an ended canary's build here.
            decision = with_canary_forecasts(obs.cfg, obs.seen, decision)
            manifests, refusals = self.dry_run(decision, plan)
            pending = self._usage_pending.get(run_id, ControllerUsage())
            busy_s = time.monotonic() - started  # docs/bigtable-ramp-and-bill.md
            finished = finish(
                obs.seen.run, decision, refusals, pending, busy_s, take_log_bytes(run_id)
            )
            decision = finished.decision
            self._usage_pending[run_id] = finished.pending_usage
            decided = time.monotonic()
            if not self.commit(obs, decision, commit_record(obs.cfg, plan, decision)):
                continue  # someone else moved the run on: decide again from fresh state
            committed = time.monotonic()
            if decision.changed:
                self._usage_pending.pop(run_id, None)  # on the run document now
            self.act(decision, manifests)
            acted = time.monotonic()
            self._log_progress(obs, plan, decision)
            self.outbox.publish(run_id, obs.seen.pods)
            steps = {
                "observe": observed - started,
                "decide": decided - observed,
                "commit": committed - decided,
                "act": acted - committed,
            }
            result = ReconcileResult(
                run_id,
                decision.state.status,
                len(decision.actions),
                attempt,
                {k: round(v, 3) for k, v in steps.items()},
            )
            return result, decision.again
        raise StaleStateError(f"run {run_id}: state kept changing under {STALE_RETRIES} reconciles")

    def _log_progress(self, obs: Observation, plan: Plan, decision: Decision) -> None:
        """The build's figures as committed (shared.control.build_metrics), for the dashboard's
        log-based metrics: after the commit, so a lost race logs nothing twice."""
        for entry in progress_entries(obs.cfg, decision.state, plan, self.rates, obs.now):
            message = entry.pop("message")
            log_json(log, "INFO", message, **entry)

    def dry_run(
        self, decision: Decision, plan: Plan
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """The manifest of every Job the decision creates, checked by the API server (a
        dry-run create), and the refusals: Job name -> why the config or the server refuses
        it. An unreachable cluster raises here, so nothing is written and the trigger is
        retried."""
        manifests: dict[str, dict[str, Any]] = {}
        refusals: dict[str, str] = {}
        for action in decision.actions:
            if not isinstance(action, CreateJob):
                continue
            setup = action.layer == SETUP_LAYER
            key = layer_key(action.stage, action.layer)
            lp = plan.setups[action.stage] if setup else plan.layers[key]
            canary = None if setup else plan.layers[key].canary
            if canary is not None and action.job_name == canary.job_name:
                lp = canary  # the layer's canary Job (shared.reconcile.canary)
            if lp.manifest is None or lp.job_name != action.job_name:
                refusals[action.job_name] = lp.refusal or (
                    f"no manifest planned for Job {action.job_name} (the plan names "
                    f"{lp.job_name or 'none'})"
                )
                continue
            ls = decision.state.setups[action.stage] if setup else decision.state.layers[key]
            manifest = stamped(
                for_create(lp.manifest, action.parallelism, action.suspend), decision.state, ls
            )
            try:
                self.cluster.validate_job(manifest)
            except ManifestRejectedError as e:
                refusals[action.job_name] = str(e)
                continue
            manifests[action.job_name] = manifest
        return manifests, refusals

    def commit(self, obs: Observation, decision: Decision, record: CommitRecord) -> bool:
        """Write the new state with its record under the precondition on the version
        observed; False if the run moved on meanwhile (decide again). A decision that changes
        nothing writes nothing, but acts only if the version is still the one observed: an
        operator's pause (or another reconcile) since then must not be undone by acting on it."""
        if not decision.changed:
            if not decision.actions:
                return True
            return self.runs.run_version(obs.seen.run.run_id) == obs.seen.run.version
        try:
            self.runs.commit(
                obs.seen.run,
                decision.state,
                record.alerts,
                record.pod_records,
                record.config_versions,
            )
        except StaleStateError:
            return False
        return True

    def act(self, decision: Decision, manifests: dict[str, dict[str, Any]]) -> None:
        """Carry out the committed decision's cluster actions, in order (alerts are in the
        outbox already)."""
        state = decision.state
        applied: set[str] = set()
        for action in decision.actions:
            if isinstance(action, ApplyConfigMap):
                name = action.manifest["metadata"]["name"]
                if name not in applied:  # one per run, however many setups start at once
                    applied.add(name)
                    self.cluster.apply_config_map(action.manifest)
            elif isinstance(action, CreateJob):
                created = self.cluster.create_job(manifests[action.job_name])
                # An existing Job is adopted only if it is ours: the next observe checks its
                # owner marks (shared.reconcile.ownership) before reading its progress.
                _log(
                    "INFO" if created else "WARNING",
                    "job created" if created else "job exists",
                    run=state.run_id,
                    stage=action.stage,
                    layer=action.layer,
                    job=action.job_name,
                )
            elif isinstance(action, DeleteJob):
                self.cluster.delete_job(action.job_name, graph_scope(state.graph_id))
            elif isinstance(action, DeletePod):
                _log("WARNING", "hung pod deleted", job=action.job_name, pod=action.pod_name)
                self.cluster.delete_pod(action.pod_name)
            elif isinstance(action, ResizePod):
                outcome = self.cluster.resize_pod(
                    action.pod_name, action.container, action.resources
                )
                resized = outcome is ResizeOutcome.RESIZED
                _log(
                    "INFO",
                    "pod resized in place" if resized else "pod resize unsupported",
                    run=state.run_id,
                    job=action.job_name,
                    pod=action.pod_name,
                    requests=action.resources.get("requests", {}),
                    then="" if resized else "the layer's next attempt gets the new requests",
                )
            elif isinstance(action, PatchJob):
                self.cluster.patch_job(
                    action.job_name, parallelism=action.parallelism, suspend=action.suspend
                )
                if action.suspend:
                    # Pause as the predecessor does: suspended, its pods go now (grace 0),
                    # not one by one over their grace periods; the failed ones stay.
                    self.cluster.drain_job(action.job_name, graph_scope(state.graph_id))


def _log(severity: str, message: str, **fields: Any) -> None:
    log_json(log, severity, message, **fields)
