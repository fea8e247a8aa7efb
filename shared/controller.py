"""The reconcile loop around the pure decision: read, decide, commit, then act.

`Controller.reconcile(run_id)` is idempotent and safe to run concurrently for one run: the
new state is committed under a precondition on the run's version before any side effect, Job
names are deterministic (a second create is a no-op), parallelism patches are absolute, and
alerts go through an outbox in the same commit, so none is lost and none is sent twice.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shared import grid
from shared.build_plan import plans_for
from shared.cluster import Cluster, ManifestRejectedError
from shared.coalesce import Verdict
from shared.config import PipelineConfig, config_from_dict
from shared.costs import RunCost, run_cost
from shared.job_events import JobEvent
from shared.layers import layer_shape
from shared.manifest import ManifestError, job_name, render_job
from shared.pricing import load_rates
from shared.reconcile import Alert, CreateJob, Decision, DeleteJob, PatchJob, Settings, decide
from shared.run_store import RunStore, StaleStateError
from shared.state import LayerState, RunState, layer_key

log = logging.getLogger("cave_pipeline.controller")

AlertPublisher = Callable[[str, dict[str, Any]], None]
LOG_TAIL_LINES = 30


def utcnow() -> datetime:
    return datetime.now(UTC)


def spend(cfg: PipelineConfig, run: RunState, now: datetime) -> float:
    """A run's estimated Autopilot Spot spend so far (priced from the packaged rate table)."""
    return estimate(cfg, run, now).usd


def estimate(cfg: PipelineConfig, run: RunState, now: datetime) -> RunCost:
    """The run's cost broken down by layer, plus the cluster fee."""
    classes = {s: cfg.job.for_stage(s).compute_class for s in run.stages}
    spot = {s: cfg.job.for_stage(s).spot for s in run.stages}
    return run_cost(run, load_rates(), cfg.region, classes, spot, now)


@dataclass
class ReconcileResult:
    run_id: str
    status: str
    actions: int
    stale_retries: int


def attempt_job_name(cfg: PipelineConfig, run_id: str, ls: LayerState) -> str:
    """Job name of a layer's current attempt: re-submits get a fresh, still deterministic name."""
    salt = run_id if ls.attempt == 0 else f"{run_id}/attempt-{ls.attempt}"
    return job_name(cfg.graph_id, ls.stage, ls.layer, salt)


class Controller:
    """Reconciles runs against the cluster. All I/O goes through the injected adapters."""

    def __init__(
        self,
        store: RunStore,
        cluster: Cluster,
        publish_alert: AlertPublisher,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store, self.cluster, self.publish_alert, self.clock = (
            store,
            cluster,
            publish_alert,
            clock,
        )

    # ---- triggers -------------------------------------------------------------------
    def on_job_event(self, event: JobEvent, max_age_s: float = 3600.0) -> ReconcileResult | None:
        """A Job event: drop stale ones, coalesce (shared.coalesce: covered, marked for the
        reconcile in flight, or reconciled here), dedupe, reconcile the owning run."""
        now = self.clock()
        if (now - event.timestamp).total_seconds() > max_age_s:
            log.info(
                json.dumps(
                    {
                        "severity": "INFO",
                        "message": "stale job event dropped",
                        "job": event.job_name,
                        "reason": event.reason,
                    }
                )
            )
            return None
        run_id = self.store.run_for_job(event.job_name)
        if run_id is None:
            return None  # not ours (another tool's Job) or a run since purged
        # Coalesce (shared.coalesce) first: a covered event needs no dedupe write either.
        holder = uuid.uuid4().hex
        verdict, seen = self.store.claim_reconcile(run_id, event.timestamp, holder, now)
        duplicate = verdict is not Verdict.COVERED and bool(event.insert_id)
        duplicate = duplicate and not self.store.first_sighting(
            event.insert_id, now + timedelta(seconds=max_age_s)
        )
        if verdict is Verdict.ACQUIRE and duplicate:
            self.store.abandon_reconcile(run_id, holder)
        if verdict is not Verdict.ACQUIRE or duplicate:
            msg = "duplicate" if duplicate else verdict.value
            log.info(json.dumps({"severity": "INFO", "message": f"job event {msg}",
                                 "run": run_id, "job": event.job_name}))  # fmt: skip
            return None
        try:
            follow_ups: int | None = 0
            while follow_ups is not None:
                read_at = self.clock()
                result = self.reconcile(run_id)
                seen = self.store.finish_reconcile(
                    run_id, holder, seen, read_at, follow_ups, self.clock()
                )
                follow_ups = None if seen is None else follow_ups + 1
            return result
        except Exception:
            # Not handled after all: let the redelivery through the dedupe and the lease.
            self.store.abandon_reconcile(run_id, holder)
            if event.insert_id:
                self.store.forget_sighting(event.insert_id)
            raise

    def on_tick(self) -> list[ReconcileResult]:
        """The heartbeat: reconcile every active run (ramps, stalls, lost events)."""
        return [self.reconcile(run_id) for run_id in self.store.active_runs()]

    # ---- the loop -------------------------------------------------------------------
    def reconcile(self, run_id: str) -> ReconcileResult:
        """Bring one run one step closer to done. Safe to call any number of times."""
        for attempt in range(5):
            run = self.store.load_run(run_id)
            cfg = config_from_dict(run.config, run.dataset)
            now = self.clock()
            running = [ls.job_name for ls in run.layers.values() if ls.phase == "running"]
            jobs = {name: self.cluster.get_job(name) for name in running}
            pods = {name: self.cluster.list_pods(name) for name, job in jobs.items() if job}
            decision = decide(
                run,
                jobs,
                plans_for(cfg, run),
                now,
                lambda ls, cfg=cfg: attempt_job_name(cfg, run_id, ls),
                Settings(cfg.controller.stall_after_s, lambda r, t, cfg=cfg: spend(cfg, r, t)),
                pods,
            )
            manifests = self._prepare_jobs(cfg, decision, now)
            alerts = [
                self._alert_body(cfg, decision.state, a, now)
                for a in decision.actions
                if isinstance(a, Alert)
            ]
            if decision.changed:
                try:
                    records = {k: [r.to_doc() for r in v] for k, v in decision.pod_records.items()}
                    self.store.commit(run, decision.state, alerts, records)
                except StaleStateError:
                    continue  # someone else moved the run on: decide again from fresh state
            self._act(decision, manifests)
            self.flush_alerts(run_id)
            return ReconcileResult(run_id, decision.state.status, len(decision.actions), attempt)
        raise StaleStateError(f"run {run_id}: state kept changing under 5 reconciles")

    def _prepare_jobs(
        self, cfg: PipelineConfig, decision: Decision, now: datetime
    ) -> dict[str, dict[str, Any]]:
        """Render and dry-run every Job the decision creates, before anything is committed.

        A manifest the config or the API server refuses fails its layer (with an alert) in
        the state about to be committed, instead of a running layer whose Job can never be
        created. An unreachable cluster raises here, so nothing is written and the trigger
        is retried."""
        manifests: dict[str, dict[str, Any]] = {}
        for action in list(decision.actions):
            if not isinstance(action, CreateJob):
                continue
            try:
                manifest = render_job(
                    cfg,
                    action.stage,
                    action.layer,
                    run_id=decision.state.run_id,
                    parallelism=action.parallelism,
                    suspend=action.suspend,
                )
                manifest["metadata"]["name"] = action.job_name
                self.cluster.validate_job(manifest)
            except (ManifestError, ManifestRejectedError) as e:
                ls = decision.state.layers[layer_key(action.stage, action.layer)]
                ls.phase, ls.finished_at, ls.failure_reason = "failed", now, f"rejected: {e}"
                decision.actions.remove(action)
                fix = f"correct the config, then `pipeline submit {decision.state.run_id} "
                details = {"reason": ls.failure_reason, "fix": fix + f"{ls.stage} {ls.layer}`"}
                decision.actions.append(Alert("layer_failed", ls.stage, ls.layer, details))
                decision.changed = True
                continue
            manifests[action.job_name] = manifest
        return manifests

    def _act(self, decision: Decision, manifests: dict[str, dict[str, Any]]) -> None:
        state = decision.state
        for action in decision.actions:
            if isinstance(action, CreateJob):
                created = self.cluster.create_job(manifests[action.job_name])
                self._log(
                    "INFO",
                    "job created" if created else "job exists",
                    state,
                    action.stage,
                    action.layer,
                    job=action.job_name,
                )
            elif isinstance(action, DeleteJob):
                self.cluster.delete_job(action.job_name)
            elif isinstance(action, PatchJob):
                self.cluster.patch_job(
                    action.job_name, parallelism=action.parallelism, suspend=action.suspend
                )

    def flush_alerts(self, run_id: str) -> int:
        """Publish the run's outbox; an alert is marked sent only after its publish."""
        sent = []
        for alert in self.store.unsent_alerts(run_id):
            self.publish_alert(alert.kind, alert.body)
            sent.append(alert.alert_id)
        self.store.mark_alerts_sent(run_id, sent)
        return len(sent)

    def _alert_body(
        self, cfg: PipelineConfig, run: RunState, alert: Alert, now: datetime
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": alert.kind,
            "run_id": run.run_id,
            "graph_id": run.graph_id,
            "stage": alert.stage,
            "layer": alert.layer,
            "at": now.isoformat(),
            **alert.details,
        }
        if alert.kind == "failed_indexes":
            body["batches"] = [self._batch_detail(cfg, alert, i) for i in alert.details["indexes"]]
        return body

    def _batch_detail(self, cfg: PipelineConfig, alert: Alert, index: int) -> dict[str, Any]:
        job = cfg.job.for_stage(alert.stage)
        shape = layer_shape(cfg.layer2_shape(), alert.layer)
        coords = grid.batch_coords(
            index, shape, job.perm_seed, grid.layer_batch_size(job.batch_size, alert.layer)
        )
        pods = self.cluster.list_pods(alert.details["job"], index)
        tail = ""
        if pods:
            latest = max(pods, key=lambda p: p.created or datetime.min.replace(tzinfo=UTC))
            tail = self.cluster.pod_log(latest.name, LOG_TAIL_LINES)
        return {"index": index, "chunks": coords.tolist(), "log_tail": tail}

    @staticmethod
    def _log(severity: str, message: str, run: RunState, stage: str, layer: int, **kw: Any) -> None:
        log.info(
            json.dumps(
                {
                    "severity": severity,
                    "message": message,
                    "run": run.run_id,
                    "stage": stage,
                    "layer": layer,
                    **kw,
                }
            )
        )
