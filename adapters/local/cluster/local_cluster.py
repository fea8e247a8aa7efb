"""The local cluster: Kubernetes Indexed-Job semantics with pods as local subprocesses.

Stands in for GKE where there is no API server (docs/local-cluster.md). It takes the same Job
manifests the controller sends to GKE, runs each pod attempt as a subprocess (see
`local_pods`), follows the Job controller's rules (see `local_jobs`), schedules pods onto
one node of `capacity_cpu` / `capacity_memory_gib`, and publishes Job events as the GKE event
exporter's LogEntries through `on_event` (the stand-in for the log sink to `job-events`).

One background thread polls pods and reconciles Jobs every `poll_interval`; every public
method is thread-safe (one lock around the state), and `on_event` is only ever called with
the lock released. Other processes read the state through `local_view.LocalClusterView`.

Pods vanish as in Kubernetes (see `vanish`): pods the Job controller deletes (scale-down,
suspend, Job failure) are gone once terminated, the pod GC deletes the oldest terminated pods
beyond `pod_gc_threshold`, and `lose_node` deletes a node's pods; their logs go with them.

Deliberate differences from Kubernetes: retries start without the exponential back-off
delay; pods deleted by a scale-down or a suspension count in neither `.status.failed` nor any
retry budget (those deleted because the Job failed do count as failed, as on Kubernetes; see
docs/local-cluster.md); a preempted pod
ends Failed with reason DisruptionTarget whatever its exit code (as after a graceful node
shutdown); the Failed condition is set as soon as the failure is decided (Kubernetes 1.31+
sets FailureTarget first and Failed once pods are gone).
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.local.cluster.events import EventSettings, EventSink
from adapters.local.cluster.jobs import LocalJob
from adapters.local.cluster.mounts import write_object
from adapters.local.cluster.node import LocalNode
from adapters.local.cluster.pods import LocalPod
from adapters.local.cluster.spec import parse_manifest
from adapters.local.cluster.vanish import (
    GKE_POD_GC_THRESHOLD,
    collect_garbage,
    lose_node,
    reap_lost,
    remove_deleted,
)
from adapters.local.cluster.view import LocalClusterView, SnapshotWriter, read_pod_log
from adapters.local.kubelet.proc_usage import pods_usage
from adapters.local.termination import unwind_on_termination
from shared.ports.cluster import ClusterError, JobStatus, PodInfo, PodUsage

__all__ = ["LocalCluster", "LocalClusterView"]

log = logging.getLogger("cave_pipeline.local_cluster")


class LocalCluster:
    """A `shared.ports.cluster.Cluster` that runs Indexed Jobs as local subprocesses."""

    def __init__(
        self,
        state_dir: Path | str,
        *,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        extra_env: dict[str, str] | None = None,
        capacity_cpu: float = 4.0,
        capacity_memory_gib: float = 16.0,
        project: str = "local",
        cluster_name: str = "local",
        location: str = "local",
        namespace: str = "default",
        poll_interval: float = 0.05,
        stop_grace_seconds: float = 10.0,
        events: EventSettings | None = None,
        pod_gc_threshold: int = GKE_POD_GC_THRESHOLD,
    ) -> None:
        """`events`: how events travel (default: GKE's recorder limits and a 5-60 s sink
        delay; `EventSettings.instant()` is the opt-out for tests that need every event).
        `pod_gc_threshold`: terminated pods kept before the pod GC deletes the oldest."""
        self.state_dir = Path(state_dir)
        self.pods_dir = self.state_dir / "pods"
        self.jobs_dir = self.state_dir / "jobs"
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        self._view = SnapshotWriter(self.jobs_dir)
        self.events = EventSink(
            on_event,
            project=project,
            cluster_name=cluster_name,
            location=location,
            namespace=namespace,
            settings=events,
        )
        self.node = LocalNode(
            pods_dir=self.pods_dir,
            capacity_cpu=capacity_cpu,
            capacity_memory_gib=capacity_memory_gib,
            extra_env=extra_env or {},
            namespace=namespace,
            events=self.events,
            objects_dir=self.state_dir,
        )
        self.namespace = namespace
        self.poll_interval = poll_interval
        self.stop_grace_seconds = stop_grace_seconds
        self._lock = threading.Lock()
        self._jobs: dict[str, LocalJob] = {}
        self._orphans: list[LocalPod] = []  # pods of deleted Jobs, still shutting down
        self._lost: list[LocalPod] = []  # pods of a lost node whose processes may still run
        self.pod_gc_threshold = pod_gc_threshold
        self._names = random.Random()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticks = 0
        self._tick_cond = threading.Condition()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> LocalCluster:
        """Start the scheduler thread (idempotent). From here a SIGTERM unwinds the process,
        so its `stop()` ends the pods (each in a process group of its own)."""
        unwind_on_termination()
        if self._thread is None or not self._thread.is_alive():
            self._stopping.clear()
            self._thread = threading.Thread(
                target=self._run, name="local-cluster-scheduler", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the scheduler and terminate every pod (SIGTERM, SIGKILL after the grace)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            pods = [p for p in self._all_pods() if p.holds_resources]
            for pod in self._lost:  # cut off from the API, but ours to stop on this machine
                pod.signal_group(signal.SIGKILL)
            self.node.shut_down(pods, self.stop_grace_seconds, self._reap_locked)
            for pod in self._lost:
                if pod.proc is not None:
                    pod.proc.wait(timeout=5)
            self._lost.clear()
            self._persist_locked()
        self.events.flush()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_ticks(self, n: int = 2, timeout: float = 10.0) -> None:
        """Block until the scheduler has run `n` more passes (for tests and settling)."""
        with self._tick_cond:
            target = self._ticks + n
            if not self._tick_cond.wait_for(lambda: self._ticks >= target, timeout):
                raise TimeoutError(f"local cluster scheduler ran no {n} passes in {timeout}s")

    # -- Cluster protocol ----------------------------------------------------------------

    def create_job(self, manifest: dict[str, Any]) -> bool:
        spec = parse_manifest(manifest)
        with self._lock:
            if spec.name in self._jobs:
                return False
            now = _now()
            job = LocalJob(spec, str(uuid.uuid4()), now, self.namespace)
            self._jobs[spec.name] = job
            log.info(
                "job %s created: %d indexes, parallelism %d%s",
                spec.name,
                spec.completions,
                spec.parallelism,
                " (suspended)" if spec.suspend else "",
            )
            if job.suspended:
                self.events.record_job_event(job, "Suspended", "Job suspended")
            self._sync_job_locked(job, now)
            self._persist_locked()
        self._after_change()
        return True

    def apply_config_map(self, manifest: dict[str, Any]) -> None:
        write_object(self.state_dir, manifest)

    def apply_secret(self, manifest: dict[str, Any]) -> None:
        """Create or replace a Secret (`pipeline setup`'s credential files)."""
        write_object(self.state_dir, manifest)

    def validate_job(self, manifest: dict[str, Any]) -> None:
        parse_manifest(manifest)  # raises ManifestRejectedError naming the field

    def get_job(self, name: str) -> JobStatus | None:
        with self._lock:
            job = self._jobs.get(name)
            return None if job is None else job.status()

    def list_jobs(self, labels: dict[str, str]) -> list[JobStatus]:
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: (j.created, j.name))
            return [
                j.status()
                for j in jobs
                if all(j.spec.labels.get(k) == v for k, v in (labels or {}).items())
            ]

    def patch_job(
        self, name: str, *, parallelism: int | None = None, suspend: bool | None = None
    ) -> None:
        if parallelism is not None and (isinstance(parallelism, bool) or parallelism < 0):
            raise ClusterError(f"parallelism must be an integer >= 0, got {parallelism!r}")
        with self._lock:
            job = self._jobs.get(name)
            if job is None:
                raise ClusterError(f"job {name!r} not found in namespace {self.namespace!r}")
            now = _now()
            if parallelism is not None and parallelism != job.parallelism:
                log.info("job %s: parallelism %d -> %d", name, job.parallelism, parallelism)
                job.parallelism, job.dirty = int(parallelism), True
            if suspend is not None and suspend != job.suspended:
                job.suspended, job.dirty = suspend, True
                if not job.finished:
                    log.info("job %s %s", name, "suspended" if suspend else "resumed")
                    if suspend:
                        self.events.record_job_event(job, "Suspended", "Job suspended")
                    else:
                        job.start_time = now  # Kubernetes resets startTime on resume
                        self.events.record_job_event(job, "Resumed", "Job resumed")
            self._sync_job_locked(job, now)
            self._persist_locked()
        self._after_change()

    def delete_job(self, name: str) -> None:
        with self._lock:
            job = self._jobs.pop(name, None)
            if job is None:
                return
            for pod in job.live_pods():
                if pod.holds_resources:
                    pod.deleting = True
                    pod.terminate(pod.grace_seconds)
                    self._orphans.append(pod)
            self._view.remove(name)
            log.info("job %s deleted", name)
        self._after_change()

    def list_pods(self, job_name: str, index: int | None = None) -> list[PodInfo]:
        with self._lock:
            job = self._jobs.get(job_name)
            # As on GKE (background propagation), a deleted Job's pods keep their job-name
            # label and stay listed while they shut down.
            pods = [] if job is None else list(job.pods)
            pods += [p for p in self._orphans if p.job_name == job_name]
            return [p.info() for p in pods if index is None or p.index == index]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        with self._lock:
            known = next((p for p in self._all_pods() if p.name == pod_name), None)
            if known is not None and known.proc is None and not known.terminal:
                return ""  # still Pending: no container yet
        return read_pod_log(self.pods_dir, pod_name, tail_lines)

    def delete_pod(self, name: str) -> None:
        """As a Kubernetes API delete of a Job's pod: SIGTERM now, SIGKILL after its grace
        period; the Job counts the ended pod as a failed attempt of its index (no
        DisruptionTarget condition) and retries the index. A missing pod is fine."""
        with self._lock:
            found = self._find_active_locked(name)
            if found is None:
                return
            job, pod = found
            if pod.kill_at is not None:
                return  # already terminating: a repeated delete changes nothing
            self.events.record_job_event(job, "SuccessfulDelete", f"Deleted pod: {pod.name}")
            if pod.proc is None:
                job.on_pod_exit(pod, None, _now())
            else:
                pod.terminate(pod.grace_seconds)
            job.dirty = True
            log.info("pod %s deleted", name)
            self._persist_locked()
        self._after_change()

    def pod_log_updated(self, pod_name: str) -> datetime | None:
        """When the pod's log file was last written (None: empty, or still Pending)."""
        if not self.pod_log(pod_name, 1):
            return None
        stamp = (self.pods_dir / f"{pod_name}.log").stat().st_mtime
        return datetime.fromtimestamp(stamp, UTC)

    def job_events(self, job_name: str) -> list[dict[str, Any]]:
        with self._lock:
            job = self._jobs.get(job_name)
            return [] if job is None else list(job.events)

    def pod_events(self, job_name: str) -> list[dict[str, Any]]:
        return []  # pods' events are recorded with the Job's (see job_events)

    def pod_usage(self, job_name: str) -> dict[str, PodUsage]:
        running = [p.name for p in self.list_pods(job_name) if p.phase == "Running"]
        return pods_usage(self.pods_dir, running)

    # -- chaos hooks ---------------------------------------------------------------------

    def preempt_pod(self, name: str) -> bool:
        """Preempt like a Spot reclaim: DisruptionTarget condition, then SIGTERM."""
        with self._lock:
            found = self._find_active_locked(name)
            if found is None:
                return False
            job, pod = found
            pod.disrupted, pod.reason, job.dirty = True, "DisruptionTarget", True
            log.info("pod %s preempted (DisruptionTarget)", name)
            if pod.proc is None:
                job.on_pod_exit(pod, None, _now())
            else:
                pod.terminate(pod.grace_seconds)
            self._persist_locked()
        self._after_change()
        return True

    def evict_pod(self, name: str, resource: str = "memory") -> bool:
        """Evict a running pod for node pressure as the kubelet's eviction manager does at a
        hard threshold: no grace (SIGKILL), the pod Failed with `status.reason` Evicted and
        the kubelet's message, the DisruptionTarget condition with reason
        TerminationByKubelet, and an `Evicted` Warning event. The Job's DisruptionTarget rule
        ignores it like a preemption: the index is retried, no retry spent. False if the pod
        is not running (the kubelet evicts only what runs on its node)."""
        with self._lock:
            found = self._find_active_locked(name)
            if found is None or found[1].proc is None:
                return False
            job, pod = found
            message = eviction_message(resource, pod, job.spec.container_name)
            pod.disrupted, pod.reason, job.dirty = True, "DisruptionTarget", True
            pod.disruption_reason, pod.disruption_message = "TerminationByKubelet", message
            pod.status_reason, pod.status_message = "Evicted", message
            pod.signal_group(signal.SIGKILL)  # a hard threshold: grace period 0
            self.events.record_pod_event(job, pod, "Evicted", message, component="kubelet")
            log.info("pod %s evicted (node pressure: %s)", name, resource)
            self._persist_locked()
        self._after_change()
        return True

    def preempt_random_pod(self, rng: random.Random | None = None) -> str | None:
        """Preempt a random running pod; its name, or None if none is running."""
        with self._lock:
            pod = self._pick_running_locked(rng)
        return pod.name if pod is not None and self.preempt_pod(pod.name) else None

    def kill_random_pod(self, rng: random.Random | None = None) -> str | None:
        """SIGKILL a random running pod (exit 137: an ordinary, counted failure)."""
        with self._lock:
            pod = self._pick_running_locked(rng)
            if pod is None:
                return None
            pod.signal_group(signal.SIGKILL)
            log.info("pod %s killed (SIGKILL)", pod.name)
        self._wake.set()
        return pod.name

    def kill_pod(self, name: str) -> bool:
        """SIGKILL one running pod (exit 137); False if it is not running."""
        with self._lock:
            found = self._find_active_locked(name)
            if found is None or found[1].proc is None:
                return False
            found[1].signal_group(signal.SIGKILL)
            log.info("pod %s killed (SIGKILL)", name)
        self._wake.set()
        return True

    def lose_node(
        self, pod_names: list[str] | None = None, keep_running: bool = False
    ) -> list[str]:
        """Lose the node under the given pods (default: every pod running): they are marked
        Failed (DisruptionTarget), replaced by their Jobs, and deleted from the API with their
        logs. With `keep_running` their processes go on, cut off from the API but not from
        Bigtable (a partitioned node); otherwise they are SIGKILLed. Returns the pods lost."""
        with self._lock:
            names = None if pod_names is None else set(pod_names)
            gone, running = lose_node(self._jobs.values(), names, _now(), keep_running)
            self._lost += running
            self._persist_locked()
        self._after_change()
        return gone

    # -- internals (callers hold self._lock unless the name says otherwise) ----------------

    def _all_pods(self) -> list[LocalPod]:
        return [p for j in self._jobs.values() for p in j.pods] + list(self._orphans)

    def _find_active_locked(self, name: str) -> tuple[LocalJob, LocalPod] | None:
        for job in self._jobs.values():
            for pod in job.pods:
                if pod.name == name and pod.active:
                    return job, pod
        return None

    def _pick_running_locked(self, rng: random.Random | None) -> LocalPod | None:
        pods = [p for j in self._jobs.values() for p in j.pods if p.active and p.proc is not None]
        pods.sort(key=lambda p: p.name)
        return (rng or random).choice(pods) if pods else None

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                with self._lock:
                    self._tick_locked()
            except Exception:
                log.exception("local cluster scheduler pass failed")
            self.events.flush()
            with self._tick_cond:
                self._ticks += 1
                self._tick_cond.notify_all()
            self._wake.wait(self.poll_interval)
            self._wake.clear()

    def _tick_locked(self) -> None:
        now = _now()
        self._reap_locked()
        for job in list(self._jobs.values()):
            self._sync_job_locked(job, now)
        self.node.schedule(list(self._jobs.values()), self._orphans, now)
        self._persist_locked()

    def _reap_locked(self) -> None:
        self.node.reap(list(self._jobs.values()), self._orphans, _now())
        reap_lost(self._lost)
        if self._stopping.is_set():
            return  # stopping the stack is not Kubernetes deleting pods: keep them and their logs
        # Deleted pods that have terminated vanish, then the pod GC keeps its threshold.
        remove_deleted(self._jobs.values())
        collect_garbage(self._jobs.values(), self.pod_gc_threshold)

    def _sync_job_locked(self, job: LocalJob, now: datetime) -> None:
        verdict = job.check_terminal(now)
        if verdict is not None:
            condition, reason, message = verdict
            log.info("job %s %s (%s)", job.name, condition, reason)
            severity = "Warning" if condition == "Failed" else "Normal"
            self.events.record_job_event(job, reason, message, severity)
        for pod in job.pods_to_delete():
            self._delete_pod_locked(job, pod)
        for index in job.indexes_to_start():
            self._create_pod_locked(job, index, now)

    def _create_pod_locked(self, job: LocalJob, index: int, now: datetime) -> None:
        pod = job.new_pod(index, now, self.pods_dir, self._names)
        self.events.record_job_event(job, "SuccessfulCreate", f"Created pod: {pod.name}")

    def _delete_pod_locked(self, job: LocalJob, pod: LocalPod) -> None:
        self.events.record_job_event(job, "SuccessfulDelete", f"Deleted pod: {pod.name}")
        if pod.proc is None:  # never started: it simply goes away
            job.drop_unstarted(pod, _now())
        else:
            pod.deleting = True
            pod.terminate(pod.grace_seconds)
            message = f"Stopping container {job.spec.container_name}"
            self.events.record_pod_event(
                job, pod, "Killing", message, component="kubelet", event_type="Normal"
            )
        job.dirty = True

    def _persist_locked(self) -> None:
        for job in self._jobs.values():
            if job.dirty:
                job.dirty = False
                self._view.write(job.status(), [p.info() for p in job.pods], job.events)

    def _after_change(self) -> None:
        """Without the lock: deliver queued events and wake the scheduler."""
        self.events.flush()
        self._wake.set()


def eviction_message(resource: str, pod: LocalPod, container: str) -> str:
    """The kubelet's words for a node-pressure eviction (pkg/kubelet/eviction/helpers.go:
    the node's resource, the threshold met, and the container using more than its request);
    the usage is made up: the local node measures none."""
    request = f"{round(pod.memory_gib * 1024)}Mi"
    using = f"{round(pod.memory_gib * 1024 * 1.5)}Mi"
    return (
        f"The node was low on resource: {resource}. Threshold quantity: 100Mi, available: "
        f"51200Ki. Container {container} was using {using}, request is {request}, has larger "
        f"consumption of {resource}. "
    )


def _now() -> datetime:
    return datetime.now(UTC)
