"""A recording fake of the cluster interface, for controller tests
(docs/testing.md#fakes-and-emulators allows this one fake: the local cluster has its own
semantic tests). Thread-safe."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from shared.ports.cluster import (
    ClusterUnreachableError,
    JobStatus,
    ManifestRejectedError,
    PodInfo,
    ResizeOutcome,
)


class RecordingCluster:
    def __init__(self) -> None:
        self.jobs: dict[str, JobStatus] = {}
        self.manifests: dict[str, dict[str, Any]] = {}
        self.creates: list[str] = []
        self.patches: list[tuple[str, int | None, bool | None]] = []
        # (Job name, scope labels) of each delete and each drain after a suspend.
        self.deletes: list[tuple[str, dict[str, str]]] = []
        self.drains: list[tuple[str, dict[str, str]]] = []
        # Calls (by method name: get_job, create_job) that fail as an unreachable API server
        # would while named here: a test's fault, set on the fake, not a replaced method.
        self.unreachable: set[str] = set()
        self._lock = threading.Lock()

    def _reach(self, call: str) -> None:
        if call in self.unreachable:
            raise ClusterUnreachableError("cannot reach the API server at https://10.0.0.1")

    def apply_config_map(self, manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        self.config_maps = {**getattr(self, "config_maps", {}), name: manifest}

    def create_job(self, manifest: dict[str, Any]) -> bool:
        self._reach("create_job")
        name = manifest["metadata"]["name"]
        with self._lock:
            self.creates.append(name)
            if name in self.jobs:
                return False
            spec = manifest["spec"]
            self.manifests[name] = manifest
            self.jobs[name] = JobStatus(
                name=name,
                labels=manifest["metadata"].get("labels", {}),
                annotations=dict(manifest["metadata"].get("annotations", {})),
                completions=spec["completions"],
                parallelism=spec["parallelism"],
                suspended=bool(spec.get("suspend")),
            )
            return True

    def validate_job(self, manifest: dict[str, Any]) -> None:
        if manifest["spec"].get("parallelism", 1) < 1:  # stands in for API-server validation
            raise ManifestRejectedError("spec.parallelism: must be >= 1")

    def get_job(self, name: str) -> JobStatus | None:
        self._reach("get_job")
        with self._lock:
            return self.jobs.get(name)

    def list_jobs(self, labels: dict[str, str]) -> list[JobStatus]:
        with self._lock:
            return [j for j in self.jobs.values() if labels.items() <= j.labels.items()]

    def patch_job(
        self, name: str, *, parallelism: int | None = None, suspend: bool | None = None
    ) -> None:
        from dataclasses import replace

        with self._lock:
            self.patches.append((name, parallelism, suspend))
            job = self.jobs[name]
            self.jobs[name] = replace(
                job,
                parallelism=job.parallelism if parallelism is None else parallelism,
                suspended=job.suspended if suspend is None else suspend,
            )

    def resize_pod(
        self, name: str, container: str, resources: dict[str, dict[str, str]]
    ) -> ResizeOutcome:
        """Recorded; `resize_answer` (default RESIZED) is what the cluster says."""
        with self._lock:
            self.resizes = [*getattr(self, "resizes", []), (name, container, resources)]
        return getattr(self, "resize_answer", ResizeOutcome.RESIZED)

    def finish(self, name: str, **status: Any) -> None:
        """Test hook: make the Job look finished (or anything else) to the controller."""
        from dataclasses import replace

        with self._lock:
            self.jobs[name] = replace(self.jobs[name], **status)

    def delete_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self.deletes.append((name, dict(scope or {})))
            self.jobs.pop(name, None)

    def drain_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self.drains.append((name, dict(scope or {})))

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        return []

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        return ""

    def job_events(self, job_name: str) -> list[dict[str, Any]]:
        return []

    def node_oom_events(self) -> list[dict[str, Any]]:
        return list(getattr(self, "node_events", []))


class PodCluster(RecordingCluster):
    """The recording fake with one pod per failed index and a log that may fail to read."""

    def __init__(self, log_error: Exception | None = None) -> None:
        super().__init__()
        self.log_error = log_error
        self.log_reads: list[str] = []
        self.on_log_read = lambda: None

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        if index is None:
            return []
        return [PodInfo(f"{job_name}-{index}-x", f"u{index}", job_name, index, "Failed", 1, 1)]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        self.on_log_read()
        self.log_reads.append(pod_name)
        if self.log_error is not None:
            raise self.log_error
        return f"traceback of {pod_name}"
