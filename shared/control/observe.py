"""The reconcile's first step: observe one run (docs/controller.md).

Reads, through the ports, everything the pure steps decide on: the run and its config, its
running layers' Jobs and their pods, a re-submitted layer's earlier Job, what the project's
other runs hold against the vCPU cap, the running setups' Jobs (and a completed one's log),
the graph's table around a setup pass, the hung-pod check's progress signals (with the hung
pods' log tails, read before they are deleted) and the completeness check of a completed
layer. Nothing later in the reconcile reads the cluster for what is here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from shared.config.config import PipelineConfig
from shared.config.config_files import config_from_dict
from shared.control.alerts import LOG_TAIL_BYTES, LOG_TAIL_LINES
from shared.control.controller_log import log_json
from shared.model.phase import Phase
from shared.model.state import LayerState, RunState
from shared.ports.bigtable_monitor import BigtableMonitor
from shared.ports.cluster import ClusterError, ClusterReader, JobStatus, PodInfo
from shared.ports.graph_table import GraphTableReader, NoGraphTableReader
from shared.ports.partial_answer import PartialAnswer
from shared.ports.pod_usage import PodUsageReader, needs_usage, with_usage
from shared.ports.run_store import RunNotFoundError, RunRecords
from shared.reconcile.completeness import (
    DoneMarkerScan,
    LayerVerdict,
    layer_grid,
    marker_coverage,
    verify_layer,
)
from shared.reconcile.decision import Snapshot
from shared.reconcile.hung_pods import (
    DoneMarkerTimes,
    HungPod,
    candidates,
    find_hung,
    layer_hung_after_s,
    plan_batch,
    window_chunk_ids,
)
from shared.reconcile.node_oom import may_be_node_oom, node_oom_victims, parse_node_oom
from shared.reconcile.oom import with_memory_factors
from shared.reconcile.process_start import first_succeeded
from shared.reconcile.root_check import runs_root_check
from shared.reconcile.run_sizes import with_run_sizes
from shared.reconcile.setup_step import needs_graph_table
from shared.reconcile.vcpu_budget import running_vcpus

log = logging.getLogger("cave_pipeline.controller")

SETUP_LOG_LINES = 1000  # of a completed setup pod's log: where it reports the graph metadata


@dataclass(frozen=True)
class Observation:
    """One read of a run: the snapshot the pure steps decide on, its config and the time."""

    seen: Snapshot
    cfg: PipelineConfig
    now: datetime


class Observer:
    """Observes runs through the run records and the cluster (read only). `graph_tables`
    reads a graph's table around its setup passes (docs/setup-passes.md); `done_times` the
    graph table's done markers for the hung-pod check (None: pod logs only); `done_markers` a
    stage's done markers for a completed layer's check (None: the Job's Complete condition is
    trusted); `bigtable_monitor` the graph's Bigtable instance load, the ramp's gate (None: no
    gate; docs/bigtable-ramp-and-bill.md); `pod_usage` the lifetime usage of a finished Job's
    pods where the cluster does not report it (None: the cluster's own figures only;
    docs/canary-and-rightsize.md)."""

    def __init__(
        self,
        runs: RunRecords,
        cluster: ClusterReader,
        clock: Callable[[], datetime],
        graph_tables: GraphTableReader | None = None,
        done_times: DoneMarkerTimes | None = None,
        done_markers: DoneMarkerScan | None = None,
        bigtable_monitor: BigtableMonitor | None = None,
        pod_usage: PodUsageReader | None = None,
    ) -> None:
        self.runs, self.cluster, self.clock = runs, cluster, clock
        self.pod_usage = pod_usage
        self.bigtable_monitor = bigtable_monitor
        self.graph_tables = graph_tables or NoGraphTableReader()
        self.done_times = done_times
        self.done_markers = done_markers

    def observe(self, run_id: str) -> Observation:
        """The run, its config snapshot, its running layers' Jobs and their pods."""
        run = self.runs.load_run(run_id)
        # The run's current config (`pipeline apply` replaces it), with the requests sized
        # from a canary or right-sized (shared.reconcile.run_sizes) and the memory its layers'
        # current attempts ask for after OOM kills on top (shared.reconcile.oom).
        cfg = with_memory_factors(
            with_run_sizes(config_from_dict(run.config, run.dataset), run), run
        )
        now = self.clock()
        running = [ls.job.name for ls in run.layers.values() if ls.phase == Phase.RUNNING]
        jobs = {name: self.cluster.get_job(name) for name in running}
        # Each Job just read: its pods by its uid, without reading it again.
        pods = {
            name: self.cluster.list_pods(name, job_uid=job.uid) for name, job in jobs.items() if job
        }
        # A re-submitted layer's earlier Job and its pods, which outlive it while they stop.
        for name in {ls.job.retire_job for ls in run.layers.values() if ls.job.retire_job}:
            jobs[name] = self.cluster.get_job(name)
            pods[name] = self.cluster.list_pods(name)
        # A layer's canary Job and its pods while it runs, and once it ended the log tails of
        # its succeeded pods: their per-chunk times (shared.reconcile.canary).
        canary_logs: dict[str, str] = {}
        for name in {
            ls.canary.job for ls in run.layers.values() if ls.canary.phase == Phase.RUNNING
        }:
            jobs[name] = self.cluster.get_job(name)
            pods[name] = self.cluster.list_pods(name)
            if (job := jobs[name]) is not None and job.finished:
                pods[name], _ = self._with_life_usage(name, pods[name])
                done = [p.name for p in pods[name] if p.phase == "Succeeded"]
                canary_logs.update({pod: self._pod_tail(pod) for pod in done})
        # The first pod to succeed in a layer: its log's process start-up, for the build's
        # timeline (one log read a layer: none succeeded before this reconcile).
        first_pod_logs = {
            ls.key: self._pod_tail(first.name)
            for ls in run.layers.values()
            if ls.phase == Phase.RUNNING and not ls.pods.succeeded
            for first in [first_succeeded(pods.get(ls.job.name, []))]
            if first is not None
        }
        # A finished layer's pods' usage over their lives, once, when the cluster does not
        # report it (GKE): right-sizing keeps it on the layer as it closes.
        usage_read = set()
        for ls in run.layers.values():
            job = jobs.get(ls.job.name) if ls.phase == Phase.RUNNING else None
            if job is not None and job.finished and ls.job.name in pods:
                pods[ls.job.name], read = self._with_life_usage(ls.job.name, pods[ls.job.name])
                if read:
                    usage_read.add(ls.job.name)
        others = 0.0
        if cfg.controller.max_vcpus is not None:
            # The cap is the project's: what the other running runs hold counts against it.
            ids = [r for r in self.runs.active_runs() if r != run_id]
            others = running_vcpus([o for o in map(self._load_if_any, ids) if o is not None])
        setups = [s.job_name for s in run.setups.values() if s.phase == Phase.RUNNING]
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
        pods = self._with_node_oom(pods)
        hung = {
            ls.key: found
            for ls in run.layers.values()
            if ls.phase == Phase.RUNNING and ls.job.name in pods
            for found in [self._hung(cfg, ls, pods[ls.job.name], now)]
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
            bigtable_load_lag_s=self.bigtable_monitor.load_lag_s if self.bigtable_monitor else 0.0,
            canary_logs=canary_logs,
            first_pod_logs=first_pod_logs,
            usage_read=frozenset(usage_read),
        )
        return Observation(snap, cfg, now)

    def _with_node_oom(self, pods: dict[str, list[PodInfo]]) -> dict[str, list[PodInfo]]:
        """The pods with `node_oom_killed` set where a node's OOMKilling event matches their
        SIGKILL (shared.reconcile.node_oom). The nodes' events are read only when some pod
        ended that way, once per reconcile; unreadable ones count no node kill (logged)."""
        if not any(may_be_node_oom(p) for listed in pods.values() for p in listed):
            return pods
        try:
            events = self.cluster.node_oom_events()
        except ClusterError as e:
            log_json(log, "WARNING", "node_oom_events_unreadable", error=str(e))
            return pods
        kills = [k for k in (parse_node_oom(e) for e in events) if k is not None]
        victims = node_oom_victims((p for listed in pods.values() for p in listed), kills)
        if not victims:
            return pods
        return {
            name: [replace(p, node_oom_killed=True) if p.uid in victims else p for p in listed]
            for name, listed in pods.items()
        }

    def _with_life_usage(self, job_name: str, pods: list[PodInfo]) -> tuple[list[PodInfo], bool]:
        """A finished Job's pods with their lifetime usage filled in by the reader, and
        whether it was read. Unreadable usage leaves the fields empty: the sizing then keeps
        the config's requests (never a build stopped for a figure). So does a partial answer
        (PartialAnswer): its peaks are lower bounds, and sizing memory down from them would
        invite OOM kills."""
        missing = needs_usage(pods)
        if self.pod_usage is None or not missing:
            return pods, False
        try:
            usage = self.pod_usage.life_usage(job_name, missing)
        except PartialAnswer as e:
            _log("WARNING", "pod usage partial", job=job_name, reason=e.reason)
            return pods, False
        except Exception as e:  # noqa: BLE001 - Monitoring down must not stop a build
            _log("WARNING", "pod usage not read", job=job_name, error=f"{type(e).__name__}: {e}")
            return pods, False
        return with_usage(pods, usage), True

    def _bigtable_load(self, cfg: PipelineConfig) -> float | None:
        """The graph's instance CPU load; None when there is no monitor or it cannot answer
        (an unknown load never holds the ramp). A partial answer's load is a lower bound:
        the true load is at least that, so holding the ramp on it is never wrong."""
        if self.bigtable_monitor is None:
            return None
        try:
            return self.bigtable_monitor.cpu_load(cfg.bigtable.project, cfg.bigtable.instance)
        except PartialAnswer as e:
            _log("WARNING", "bigtable load partial", reason=e.reason)
            return e.value if isinstance(e.value, float) else None
        except Exception as e:  # noqa: BLE001 - Monitoring down must not stop a build
            _log("WARNING", "bigtable load not read", error=f"{type(e).__name__}: {e}")
            return None

    def _hung(
        self, cfg: PipelineConfig, ls: LayerState, pods: list[PodInfo], now: datetime
    ) -> list[HungPod]:
        """The layer's hung pods (shared.reconcile.hung_pods), each with its log tail. Only the pods
        old enough to be hung are read; one whose progress cannot be read is not judged."""
        ctl = cfg.controller
        # Logs alone may show one line a batch (the predecessor's harness, our worker at
        # INFO): without done markers the threshold spans a whole batch.
        per_signal = 1 if self.done_times is not None else plan_batch(cfg, ls)
        after = layer_hung_after_s(ls, ctl.hung_after_chunks, ctl.hung_floor_s, per_signal)
        progress: dict[str, list[datetime | None]] = {}
        for pod in candidates(pods, now, after, ls.faults.hung_pod_uids):
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
        the pure decide, which records it or fails the layer (shared.reconcile.layer_verify). A read
        that fails fails this reconcile (retried on the next trigger), like an unreachable
        cluster: the layer is never marked succeeded unchecked."""
        if self.done_markers is None:
            return {}
        due = [
            ls
            for ls in run.layers.values()
            if ls.phase == Phase.RUNNING
            and (job := jobs.get(ls.job.name)) is not None
            and (
                job.condition == "Complete"
                # a failed root layer of an image's ingest: all markers means the root check
                # failed, not the chunk (shared.reconcile.root_check)
                or (job.condition == "Failed" and runs_root_check(cfg, ls.stage, ls.layer))
            )
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
            return self.runs.load_run(run_id)
        except RunNotFoundError:
            return None  # purged since the query

    def _setup_log(self, job_name: str) -> str:
        """The log of a completed setup Job's pod: the graph metadata it reports."""
        pods = [p for p in self.cluster.list_pods(job_name, 0) if p.phase == "Succeeded"]
        if not pods:
            return ""
        return self.cluster.pod_log(pods[-1].name, SETUP_LOG_LINES)


def _log(severity: str, message: str, **fields: Any) -> None:
    log_json(log, severity, message, **fields)
