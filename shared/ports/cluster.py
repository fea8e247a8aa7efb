"""The cluster port: reads (`ClusterReader`: the operator CLI and the controller) apart
from Job writes (`JobWriter`: the controller only); `Cluster` is both.

Implemented by `adapters.gke.cluster.GkeCluster` (the `kubernetes` client), on GKE and on the
local stack's Kubernetes alike. Pure module: dataclasses and a Protocol, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol


class ClusterError(RuntimeError):
    """The cluster refused a request or could not be reached; the message says what to do."""


class ClusterUnreachableError(ClusterError):
    """The API server did not answer (transient: the caller may retry later)."""


class ManifestRejectedError(ClusterError):
    """The API server rejected a manifest (permanent until the config is fixed)."""


class MetricsUnavailableError(ClusterError):
    """Pod usage cannot be read (GKE: the metrics API is not installed, not yet serving, or
    forbidden; local: the pods' processes are not visible in /proc)."""


@dataclass(frozen=True)
class PodUsage:
    """A running pod's current usage."""

    cpu: float  # vCPU (cores) in use
    memory_gib: float  # working set (GKE) or resident set (local)
    processes: int = 0  # local only: processes sampled


@dataclass(frozen=True)
class JobStatus:
    """A Job as observed, in Kubernetes' own terms (interval strings as in `.status`)."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    completions: int
    parallelism: int
    suspended: bool
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0  # failed pods, as `.status.failed`
    completed_indexes: str = ""
    failed_indexes: str = ""
    # Terminal condition, if any: "Complete" or "Failed", with the Failed reason
    # (MaxFailedIndexesExceeded, FailedIndexes, BackoffLimitExceeded, ...).
    condition: str | None = None
    reason: str | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    created: datetime | None = None
    # metadata.uid: a Job re-created under the same name has a new one, and its pods carry it
    # as batch.kubernetes.io/controller-uid (shared.model.job_generation).
    uid: str = ""

    @property
    def finished(self) -> bool:
        return self.condition in ("Complete", "Failed")


@dataclass(frozen=True)
class PodInfo:
    """One pod attempt of a Job index."""

    name: str
    uid: str
    job_name: str
    index: int
    phase: str  # Pending, Running, Succeeded, Failed
    cpu_request: float  # vCPU
    memory_request_gib: float
    created: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int | None = None
    reason: str | None = None  # e.g. DisruptionTarget, FailedScheduling, Error
    node: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    # The DisruptionTarget condition's reason (TerminationByKubelet, PreemptionByScheduler,
    # DeletionByPodGC, ...) and the pod's `status.reason` (Evicted, Terminated, ...): together
    # they tell a node-pressure eviction from a Spot preemption (shared.reconcile.evictions).
    disruption_reason: str | None = None
    status_reason: str | None = None
    # What the pod used over its life, filled from the pod-usage port (GKE: Cloud Monitoring;
    # the local stack: the process kubelet's /proc samples), None until then: its highest
    # resident memory and its mean vCPU in use (CPU seconds over its running time).
    # Right-sizing and the canary read them (docs/canary-and-rightsize.md).
    peak_memory_gib: float | None = None
    cpu_used: float | None = None
    # Ended by the node's OOM killer (its `OOMKilling` event matched to this pod's SIGKILL:
    # shared.reconcile.node_oom), filled by the controller's observation; the container's own
    # OOM kill is `reason == "OOMKilled"`.
    node_oom_killed: bool = False


class ClusterReader(Protocol):
    """What may be read from the cluster: Jobs, pods, logs, events, usage. The operator CLI
    and its views get only this (every change is an operator action the controller acts on)."""

    def get_job(self, name: str) -> JobStatus | None:
        """The Job's status, or None if there is no such Job."""

    def list_jobs(self, labels: dict[str, str]) -> list[JobStatus]:
        """Jobs whose labels include all of `labels`."""

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        """The pods of the Job now under `job_name` (every attempt still known), optionally
        of one index: selected by its uid (`batch.kubernetes.io/controller-uid`), so pods of
        an earlier Job of the same name are never counted, billed or shown; [] when there is
        no such Job. `job_uid`: the uid of the Job the caller has just read (saves reading it
        again); empty: the Job is read."""

    def pod_log_updated(self, pod_name: str) -> datetime | None:
        """When the pod's newest log line was written (None: no line yet); raises
        ClusterError if the log cannot be read (the pod is gone)."""

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        """The last lines of a pod's log."""

    def job_events(self, job_name: str) -> list[dict[str, Any]]:
        """The Job's Kubernetes events (v1 Event dicts), oldest first."""

    def pod_events(self, job_name: str) -> list[dict[str, Any]]:
        """Events about the pods of the Job now under `job_name` (scheduling, image pulls,
        OOM kills), oldest first; [] where the cluster keeps none. Events of an earlier Job's
        pods of the same name are left out."""

    def node_oom_events(self) -> list[dict[str, Any]]:
        """The Nodes' `OOMKilling` events (node-problem-detector's kernel monitor: the node's
        OOM killer ended a process), oldest first; [] where the cluster keeps none."""

    def pod_usage(self, job_name: str) -> dict[str, PodUsage]:
        """Current CPU and memory of the running pods of the Job now under `job_name`, by pod
        name (pods without a sample yet are absent; an earlier Job's pods of the same name
        are left out); MetricsUnavailableError says why none can be read."""


class JobWriter(Protocol):
    """What changes the cluster: Jobs, their pods, the run's ConfigMap. Only the controller
    writes. Every call is idempotent where Kubernetes allows it."""

    def create_job(self, manifest: dict[str, Any]) -> bool:
        """Create a Job; returns False if a Job of that name already exists (409)."""

    def validate_job(self, manifest: dict[str, Any]) -> None:
        """Check a manifest as the API server would (a dry-run create), changing nothing:
        ManifestRejectedError if it would be refused, ClusterUnreachableError if the
        cluster cannot be asked. Called before any state that depends on it is written."""

    def apply_config_map(self, manifest: dict[str, Any]) -> None:
        """Create or replace a v1 ConfigMap (a run's dataset file, mounted by its pods)."""

    def patch_job(
        self, name: str, *, parallelism: int | None = None, suspend: bool | None = None
    ) -> None:
        """Set parallelism and/or suspend to absolute values."""

    def delete_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        """Delete the Job and its pods, as the predecessor does: suspend it first (so it
        refills nothing; a refused suspend is no obstacle), delete its pods in one
        collection delete with grace 0, then the Job with background propagation. Every pod
        sweep selects the Job's uid and the labels of `scope` (the run's graph), so another
        graph's pods are never touched. Missing is fine."""

    def drain_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        """After a suspend (`pipeline pause`, the budget guard): delete the Job's unfinished
        pods at once (one collection delete, grace 0; Failed and Succeeded pods are kept, so
        `pipeline inspect` still reads a failed one), and release its condemned pods still
        held by the `batch.kubernetes.io/job-tracking` finalizer. Scoped as `delete_job`.
        A missing or finished Job is fine."""

    def delete_pod(self, name: str) -> None:
        """Delete one pod (graceful: SIGTERM, SIGKILL after its grace period); missing is
        fine. Its Job counts it as a failed attempt of its index and retries the index."""

    def resize_pod(
        self, name: str, container: str, resources: dict[str, dict[str, str]]
    ) -> ResizeOutcome:
        """Resize a running pod's container in place to `resources` (its whole `resources`
        block) through the pod `resize` subresource (Kubernetes 1.33+); UNSUPPORTED where
        the cluster answers 422 or has no such subresource (404)."""


class ResizeOutcome(Enum):
    """What the cluster made of an in-place resize of a pod (docs/cli.md#steering-a-build)."""

    RESIZED = "resized"  # accepted: the pod's requests are the new ones (the kubelet actuates)
    UNSUPPORTED = "unsupported"  # 422 (not resizable so) or 404 (no `resize` subresource)


class Cluster(ClusterReader, JobWriter, Protocol):
    """The controller's cluster: reads and Job writes on Indexed Jobs (the adapters
    implement both)."""
