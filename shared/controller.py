"""The reconcile loop around the pure core: observe, plan, decide, dry-run, reject, commit,
act, publish.

`Controller.reconcile(run_id)` is idempotent and safe to run concurrently for one run: the
new state is committed under a precondition on the run's version before any side effect, Job
names are deterministic (a second create is a no-op), parallelism patches are absolute, and
alerts go through an outbox in the same commit, so none is lost and none is sent twice.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.alert_publisher import AlertPublisher
from shared.alerts import (
    LOG_TAIL_BYTES,
    LOG_TAIL_LINES,
    alert_body,
    claim_lost_body,
    claim_lost_chunks,
    tail_requests,
    with_log_tails,
)
from shared.bigtable_monitor import BigtableMonitor
from shared.build_plan import plan_for
from shared.cluster import (
    Cluster,
    ClusterUnreachableError,
    JobStatus,
    ManifestRejectedError,
    PodInfo,
)
from shared.coalesce import Verdict
from shared.completeness import (
    DoneMarkerScan,
    LayerVerdict,
    layer_grid,
    marker_coverage,
    verify_layer,
)
from shared.config import PipelineConfig, config_from_dict
from shared.controller_usage import ControllerUsage, reconcile_usage
from shared.graph_table import GraphTableReader, NoGraphTableReader
from shared.hung_pods import (
    DoneMarkerTimes,
    HungPod,
    candidates,
    find_hung,
    layer_hung_after_s,
    plan_batch,
    window_chunk_ids,
)
from shared.job_events import JobEvent
from shared.manifest import for_create
from shared.oom import with_memory_factors
from shared.ownership import stamped
from shared.pricing import RateRow, load_rates
from shared.reconcile import (
    Alert,
    CreateJob,
    Decision,
    DeleteJob,
    DeletePod,
    PatchJob,
    Plan,
    Snapshot,
    decide,
    reject,
)
from shared.rightsize_run import with_run_sizes
from shared.run_store import RunNotFoundError, RunStore, StaleStateError
from shared.setup_job import dataset_config_map_manifest
from shared.setup_step import needs_graph_table
from shared.state import SETUP_LAYER, LayerState, RunState, layer_key
from shared.vcpu_budget import running_vcpus

log = logging.getLogger("cave_pipeline.controller")

CLAIM_LOST_PODS = 20  # logs of newly failed pods one reconcile reads for claim_lost records
CLAIM_LOST_LOG_LINES = 300
SETUP_LOG_LINES = 1000  # of a completed setup pod's log: where it reports the graph metadata
STALE_RETRIES = 5  # reconciles of one run that may lose the commit race before giving up
UNHEALTHY_AFTER = 5  # consecutive failed tick reconciles of one run before `run_unhealthy`
# Failures that say nothing about the run itself: if every run fails with one, the tick is
# retried by Pub/Sub rather than acknowledged.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ClusterUnreachableError,
    ConnectionError,
    TimeoutError,
)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class ReconcileResult:
    run_id: str
    status: str
    actions: int
    stale_retries: int


@dataclass(frozen=True)
class Observed:
    """One read of a run: the snapshot the pure core decides on, its config and the time."""

    seen: Snapshot
    cfg: PipelineConfig
    now: datetime


class Controller:
    """Reconciles runs against the cluster. All I/O goes through the injected adapters;
    `rates` is the Autopilot rate table the budget guard prices with (default: packaged);
    `graph_tables` reads a graph's table around its setup passes (docs/setup-passes.md);
    `done_times` reads the graph table's done markers for the hung-pod check."""

    def __init__(
        self,
        store: RunStore,
        cluster: Cluster,
        publish_alert: AlertPublisher,
        clock: Callable[[], datetime] = utcnow,
        rates: tuple[RateRow, ...] | None = None,
        graph_tables: GraphTableReader | None = None,
        done_times: DoneMarkerTimes | None = None,
        done_markers: DoneMarkerScan | None = None,
        bigtable_monitor: BigtableMonitor | None = None,
    ) -> None:
        self.store, self.cluster, self.publish_alert, self.clock = (
            store,
            cluster,
            publish_alert,
            clock,
        )
        self.rates = rates if rates is not None else load_rates()
        self.graph_tables = graph_tables or NoGraphTableReader()
        # Where the hung-pod check reads done markers (None: it reads only pod logs).
        self.done_times = done_times
        # Reads a stage's done markers for the completeness check of a completed layer
        # (shared.completeness; None: no check, the Job's Complete condition is trusted).
        self.done_markers = done_markers
        # The graph's Bigtable instance load, the ramp's gate (None: no gate;
        # docs/bigtable-ramp-and-bill.md).
        self.bigtable_monitor = bigtable_monitor
        # Each run's usage counted since its last commit (shared.controller_usage).
        self._usage_pending: dict[str, ControllerUsage] = {}

    # ---- triggers -------------------------------------------------------------------
    def on_job_event(self, event: JobEvent, max_age_s: float = 3600.0) -> ReconcileResult | None:
        """A Job event: drop stale ones, coalesce (shared.coalesce: covered, marked for the
        reconcile in flight, or reconciled here), dedupe, reconcile the owning run."""
        now = self.clock()
        if (now - event.timestamp).total_seconds() > max_age_s:
            _log("INFO", "stale job event dropped", job=event.job_name, reason=event.reason)
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
            _log("INFO", f"job event {msg}", run=run_id, job=event.job_name)
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
        """The heartbeat: reconcile every active run (ramps, stalls, lost events).

        Runs are isolated: one that raises is logged, counted on its run document and
        skipped, so it never holds up the others; after UNHEALTHY_AFTER consecutive failures
        a `run_unhealthy` alert is sent once (until a reconcile of it succeeds again). The
        tick raises (to be redelivered) only when every run failed for a transient reason."""
        results: list[ReconcileResult] = []
        failures: list[Exception] = []
        tried = 0
        for run_id in self.store.active_runs():
            tried += 1
            try:
                results.append(self.reconcile(run_id))
                self.store.record_reconcile_success(run_id)
            except RunNotFoundError:
                tried -= 1  # purged since the query
            except Exception as e:  # noqa: BLE001 - isolation: the other runs go on
                failures.append(e)
                self._reconcile_failed(run_id, e)
        if failures and len(failures) == tried:
            if all(isinstance(e, TRANSIENT_ERRORS) for e in failures):
                raise failures[0]
        return results

    def _reconcile_failed(self, run_id: str, error: Exception) -> None:
        """Log, count and (once per spell) alert one run's failed reconcile; best effort."""
        text = f"{type(error).__name__}: {error}"
        _log("ERROR", "reconcile failed", run=run_id, error=text)
        try:
            # The store puts `run_unhealthy` into the outbox with the count that makes it due;
            # flushing on every failure retries a publish that failed the first time.
            if self.store.record_reconcile_failure(run_id, text, self.clock(), UNHEALTHY_AFTER):
                self.flush_alerts(run_id)
        except Exception as e:  # noqa: BLE001 - the store may be what is failing
            _log("ERROR", "reconcile failure not recorded", run=run_id, error=repr(e))

    # ---- the loop -------------------------------------------------------------------
    def reconcile(self, run_id: str) -> ReconcileResult:
        """Bring one run one step closer to done. Safe to call any number of times."""
        for attempt in range(STALE_RETRIES):
            started = time.monotonic()  # the reconcile's wall time, for its own bill
            obs = self._observe(run_id)
            plan = plan_for(obs.cfg, obs.seen.run, obs.seen.graph_table)
            decision = decide(obs.seen, plan, self.rates, obs.now)
            manifests, refusals = self._dry_run(decision, plan)
            decision = reject(decision, refusals)
            if any(isinstance(a, CreateJob) and a.layer == SETUP_LAYER for a in decision.actions):
                # The setup pods mount the run's dataset file (PCG_DATASET): write it first.
                manifests["configmap"] = dataset_config_map_manifest(obs.cfg, run_id)
            self._count_usage(obs, decision, started)  # docs/bigtable-ramp-and-bill.md
            if decision.changed:
                if not self._commit(obs, decision):
                    continue  # someone else moved the run on: decide again from fresh state
                self._usage_pending.pop(run_id, None)
            elif decision.actions and self.store.run_version(run_id) != obs.seen.run.version:
                # Nothing to commit, so nothing checked the read: an operator's pause (or
                # another reconcile) since then must not be undone by acting on it.
                continue
            self._act(decision, manifests)
            self.flush_alerts(run_id)
            return ReconcileResult(run_id, decision.state.status, len(decision.actions), attempt)
        raise StaleStateError(f"run {run_id}: state kept changing under {STALE_RETRIES} reconciles")

    def _observe(self, run_id: str) -> Observed:
        """The run, its config snapshot, its running layers' Jobs and their pods."""
        run = self.store.load_run(run_id)
        # The run's current config (`pipeline apply` replaces it), with the memory its
        # layers' current attempts ask for after OOM kills (shared.oom).
        cfg = with_memory_factors(
            with_run_sizes(config_from_dict(run.config, run.dataset), run), run
        )
        now = self.clock()
        running = [ls.job_name for ls in run.layers.values() if ls.phase == "running"]
        jobs = {name: self.cluster.get_job(name) for name in running}
        pods = {name: self.cluster.list_pods(name) for name, job in jobs.items() if job}
        # A re-submitted layer's earlier Job and its pods, which outlive it while they stop.
        for name in {ls.retire_job for ls in run.layers.values() if ls.retire_job}:
            jobs[name] = self.cluster.get_job(name)
            pods[name] = self.cluster.list_pods(name)
        # A layer's canary Job and its pods while it runs, and once it ended the log tails of
        # its succeeded pods: their per-chunk times (shared.canary).
        canary_logs: dict[str, str] = {}
        for name in {ls.canary_job for ls in run.layers.values() if ls.canary_phase == "running"}:
            jobs[name] = self.cluster.get_job(name)
            pods[name] = self.cluster.list_pods(name)
            if (job := jobs[name]) is not None and job.finished:
                done = [p.name for p in pods[name] if p.phase == "Succeeded"]
                canary_logs.update({pod: self._pod_tail(pod) for pod in done})
        others = 0.0
        if cfg.controller.max_vcpus is not None:
            # The cap is the project's: what the other running runs hold counts against it.
            ids = [r for r in self.store.active_runs() if r != run_id]
            others = running_vcpus([o for o in map(self._load_if_any, ids) if o is not None])
        setups = [s.job_name for s in run.setups.values() if s.phase == "running"]
        setup_jobs = {name: self.cluster.get_job(name) for name in setups}
        logs = {
            name: self._setup_log(name)
            for name, job in setup_jobs.items()
            if job is not None and job.condition == "Complete"
        }
        # Around a setup pass, the graph's table: its state decides an image's ingest setup
        # command, and a completed setup counts only with the metadata there.
        table = None
        if needs_graph_table(run, cfg, setup_jobs):
            table = self.graph_tables.read(
                cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance
            )
        hung = {
            ls.key: found
            for ls in run.layers.values()
            if ls.phase == "running" and ls.job_name in pods
            for found in [self._hung(cfg, ls, pods[ls.job_name], now)]
            if found
        }
        snap = Snapshot(
            run,
            {**jobs, **setup_jobs},
            pods,
            others_vcpus=others,
            setup_logs=logs,
            graph_table=table,
            hung=hung,
            ledger_checks=self._ledger_checks(run, cfg, jobs),
            bigtable_load=self._bigtable_load(cfg) if running else None,
            canary_logs=canary_logs,
        )
        return Observed(snap, cfg, now)

    def _count_usage(self, obs: Observed, decision: Decision, started: float) -> None:
        """Add this reconcile's use of Firestore, Pub/Sub, Logging and function time to the
        run's pending counts; a committing decision carries them onto the run document."""
        run, state = obs.seen.run, decision.state
        changed = sum(
            run.layers[k].to_doc() != ls.to_doc()
            for k, ls in state.layers.items()
            if k in run.layers
        )
        usage = reconcile_usage(
            len(run.layers),
            decision.changed,
            changed,
            sum(len(v) for v in decision.pod_records.values()),
            sum(isinstance(a, Alert) for a in decision.actions),
            time.monotonic() - started,
            _log_bytes.pop(run.run_id, 0),
        )
        pending = self._usage_pending.get(run.run_id, ControllerUsage()) + usage
        self._usage_pending[run.run_id] = pending
        if decision.changed:
            state.controller_usage = (
                ControllerUsage.from_doc(run.controller_usage) + pending
            ).to_doc()

    def _bigtable_load(self, cfg: PipelineConfig) -> float | None:
        """The graph's instance CPU load; None when there is no monitor or it cannot answer
        (an unknown load never holds the ramp)."""
        if self.bigtable_monitor is None:
            return None
        try:
            return self.bigtable_monitor.cpu_load(cfg.bigtable.project, cfg.bigtable.instance)
        except Exception as e:  # noqa: BLE001 - Monitoring down must not stop a build
            _log("WARNING", "bigtable load not read", error=f"{type(e).__name__}: {e}")
            return None

    def _hung(
        self, cfg: PipelineConfig, ls: LayerState, pods: list[PodInfo], now: datetime
    ) -> list[HungPod]:
        """The layer's hung pods (shared.hung_pods), each with its log tail. Only the pods
        old enough to be hung are read; one whose progress cannot be read is not judged."""
        ctl = cfg.controller
        # Logs alone may show one line a batch (the predecessor's harness, our worker at
        # INFO): without done markers the threshold spans a whole batch.
        per_signal = 1 if self.done_times is not None else plan_batch(cfg, ls)
        after = layer_hung_after_s(ls, ctl.hung_after_chunks, ctl.hung_floor_s, per_signal)
        progress: dict[str, list[datetime | None]] = {}
        for pod in candidates(pods, now, after, ls.hung_pod_uids):
            try:
                progress[pod.name] = self._progress(cfg, ls, pod)
            except Exception as e:  # noqa: BLE001 - unjudged this time, never deleted blind
                _log("WARNING", "pod progress unreadable", pod=pod.name, error=repr(e))
        judged = [p for p in pods if p.name in progress]
        found = find_hung(judged, progress, now, after)
        return [replace(h, log_tail=self._pod_tail(h.name)) for h in found]

    def _progress(self, cfg: PipelineConfig, ls: LayerState, pod: PodInfo) -> list[datetime | None]:
        """When the pod last showed progress: its newest log line and, where the controller
        reads the graph table, the newest done marker of its batch."""
        stamps = [self.cluster.pod_log_updated(pod.name)]
        if self.done_times is not None:
            ids = window_chunk_ids(cfg, ls.stage, ls.layer, pod.index)
            stamps.append(self.done_times.newest_done(cfg, ls.stage, ids))
        return stamps

    def _pod_tail(self, pod_name: str) -> str:
        try:
            return self.cluster.pod_log(pod_name, LOG_TAIL_LINES)[-LOG_TAIL_BYTES:]
        except Exception as e:  # noqa: BLE001 - the alert matters more than its tail
            _log("WARNING", "log tail unavailable", pod=pod_name, error=str(e))
            return ""

    def _ledger_checks(
        self, run: RunState, cfg: PipelineConfig, jobs: dict[str, JobStatus | None]
    ) -> dict[str, LayerVerdict]:
        """The completeness check of each running layer whose Job is Complete, for the
        stages whose workers write done markers: one ledger scan per stage. Read here, not in
        the pure decide, which records it or fails the layer (shared.layer_verify). A read
        that fails fails this reconcile (retried on the next trigger), like an unreachable
        cluster: the layer is never marked succeeded unchecked."""
        if self.done_markers is None:
            return {}
        due = [
            ls
            for ls in run.layers.values()
            if ls.phase == "running"
            and (job := jobs.get(ls.job_name)) is not None
            and job.condition == "Complete"
            and marker_coverage(cfg, ls.stage).checkable
        ]
        done: dict[str, Any] = {}
        checks = {}
        for ls in due:
            if ls.stage not in done:
                done[ls.stage] = self.done_markers(cfg, ls.stage)
            checks[ls.key] = verify_layer(layer_grid(cfg, ls.stage, ls.layer), done[ls.stage])
            _log(
                "INFO" if checks[ls.key].complete else "WARNING",
                "layer verified",
                run=run.run_id,
                stage=ls.stage,
                layer=ls.layer,
                chunks_marked=checks[ls.key].chunks_marked,
                chunks_expected=checks[ls.key].chunks_expected,
            )
        return checks

    def _load_if_any(self, run_id: str) -> RunState | None:
        try:
            return self.store.load_run(run_id)
        except RunNotFoundError:
            return None  # purged since the query

    def _setup_log(self, job_name: str) -> str:
        """The log of a completed setup Job's pod: the graph metadata it reports."""
        pods = [p for p in self.cluster.list_pods(job_name, 0) if p.phase == "Succeeded"]
        if not pods:
            return ""
        return self.cluster.pod_log(pods[-1].name, SETUP_LOG_LINES)

    def _dry_run(
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
                lp = canary  # the layer's canary Job (shared.canary)
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

    def _commit(self, obs: Observed, decision: Decision) -> bool:
        """Write the decision under the precondition; False if the run moved on meanwhile."""
        state = decision.state
        alerts = [
            alert_body(obs.cfg, state, a, decision.at)
            for a in decision.actions
            if isinstance(a, Alert)
        ]
        alerts += self._claim_lost_alerts(decision)
        records = {k: [r.to_doc() for r in v] for k, v in decision.pod_records.items()}
        try:
            self.store.commit(obs.seen.run, state, alerts, records)
        except StaleStateError:
            return False
        return True

    def _claim_lost_alerts(self, decision: Decision) -> list[dict[str, Any]]:
        """A `claim_lost` alert per layer whose pods, newly recorded as failed transient
        (exit 1), logged a lost claim. Committed with the pod records, so each pod is
        alerted once. Best effort: an unreadable log (a pod gone) is skipped."""
        out = []
        budget = CLAIM_LOST_PODS
        for key, records in decision.pod_records.items():
            ls = decision.state.layers[key]
            pods = []
            for rec in records:
                if rec.phase != "Failed" or rec.exit_code != 1 or budget <= 0:
                    continue
                budget -= 1
                try:
                    text = self.cluster.pod_log(rec.name, CLAIM_LOST_LOG_LINES)
                except Exception as e:  # noqa: BLE001 - the alert is a courtesy
                    _log("WARNING", "pod log unavailable", pod=rec.name, error=str(e))
                    continue
                chunks = claim_lost_chunks(text)
                if chunks:
                    pods.append((rec.name, rec.index, chunks))
            if pods:
                state = decision.state
                out.append(
                    claim_lost_body(state, ls.stage, ls.layer, ls.job_name, pods, decision.at)
                )
        return out

    def _act(self, decision: Decision, manifests: dict[str, dict[str, Any]]) -> None:
        state = decision.state
        if "configmap" in manifests:
            self.cluster.apply_config_map(manifests["configmap"])
        for action in decision.actions:
            if isinstance(action, CreateJob):
                created = self.cluster.create_job(manifests[action.job_name])
                # An existing Job is adopted only if it is ours: the next observe checks its
                # owner marks (shared.ownership) before reading its progress.
                _log(
                    "INFO" if created else "WARNING",
                    "job created" if created else "job exists",
                    run=state.run_id,
                    stage=action.stage,
                    layer=action.layer,
                    job=action.job_name,
                )
            elif isinstance(action, DeleteJob):
                self.cluster.delete_job(action.job_name)
            elif isinstance(action, DeletePod):
                _log("WARNING", "hung pod deleted", job=action.job_name, pod=action.pod_name)
                self.cluster.delete_pod(action.pod_name)
            elif isinstance(action, PatchJob):
                self.cluster.patch_job(
                    action.job_name, parallelism=action.parallelism, suspend=action.suspend
                )

    # ---- publish --------------------------------------------------------------------
    def flush_alerts(self, run_id: str) -> int:
        """Publish the run's outbox. Each entry is claimed under a precondition before its
        publish (of concurrent flushers one wins), and marked sent after it; a flusher that
        dies in between leaves a claim that expires, so delivery is at least once, with the
        entry's id in the body and the `alert_id` attribute for subscribers to dedupe on."""
        holder = uuid.uuid4().hex
        sent = []
        for alert in self.store.unsent_alerts(run_id):
            if not self.store.claim_alert(run_id, alert, holder):
                continue  # another reconcile is publishing it
            body = {**self._enriched(run_id, alert.body), "alert_id": alert.alert_id}
            try:
                self.publish_alert(alert.kind, body)
            except Exception:
                self.store.release_alert(run_id, alert.alert_id)
                raise
            sent.append(alert.alert_id)
        self.store.mark_alerts_sent(run_id, sent)
        return len(sent)

    def _enriched(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The body with its failed batches' log tails, where the cluster still has them."""
        wanted = tail_requests(body)
        if not wanted:
            return body
        return with_log_tails(body, {i: self._log_tail(run_id, job, i) for job, i in wanted})

    def _log_tail(self, run_id: str, job: str, index: int) -> str:
        """The latest pod's log tail of a Job index; "" if gone or unreadable. Best effort:
        the alert matters more than its tail, so no error here fails the reconcile."""
        try:
            pods = self.cluster.list_pods(job, index)
            if not pods:
                return ""
            latest = max(pods, key=lambda p: p.created or datetime.min.replace(tzinfo=UTC))
            return self.cluster.pod_log(latest.name, LOG_TAIL_LINES)
        except Exception as e:  # noqa: BLE001 - any failure leaves the tail empty
            _log("WARNING", "log tail unavailable", run=run_id, job=job, index=index, error=str(e))
            return ""


_log_bytes: dict[str, int] = {}  # per run, logged since its last reconcile was counted


def _log(severity: str, message: str, **fields: Any) -> None:
    line = json.dumps({"severity": severity, "message": message, **fields}, default=str)
    if "run" in fields:
        _log_bytes[str(fields["run"])] = _log_bytes.get(str(fields["run"]), 0) + len(line)
    log.info(line)
