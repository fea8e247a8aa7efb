"""One Indexed Job's bookkeeping in the local cluster: the Job controller's decisions.

No processes and no locking here: `LocalCluster` calls these under its lock and carries
out what they decide (create, delete, terminate pods; emit events). Semantics follow
batch/v1 in Kubernetes 1.33 with `backoffLimitPerIndex` and `podReplacementPolicy: Failed`
(the default with a podFailurePolicy): an index gets a replacement pod only after its
previous pod has fully terminated, and terminating pods count against parallelism. Once the
Job has failed, every pod that had not terminated counts in `.status.failed` as it ends
(unless an Ignore rule matches it), as the Job controller counts them; docs/local-cluster.md
lists the conformance cases and their Kubernetes sources.
"""

from __future__ import annotations

import logging
import random
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters.local.cluster.pods import LocalPod, pod_name
from adapters.local.cluster.spec import JobSpec, match_failure_rule
from shared.model import intervals
from shared.ports.cluster import JobStatus

log = logging.getLogger("cave_pipeline.local_cluster")

MAX_EVENTS_PER_JOB = 2000

# Failed reason -> event message, as the Job controller words them.
FAILED_MESSAGES = {
    "BackoffLimitExceeded": "Job has reached the specified backoff limit",
    "MaxFailedIndexesExceeded": "Job has exceeded the specified maximal number of failed indexes",
    "FailedIndexes": "Job has failed indexes",
}


class LocalJob:
    def __init__(self, spec: JobSpec, uid: str, now: datetime, namespace: str = "default") -> None:
        self.spec = spec
        self.uid = uid
        self.namespace = namespace
        self.created = now
        self.parallelism = spec.parallelism
        self.suspended = spec.suspend
        self.start_time: datetime | None = None if spec.suspend else now
        self.completion_time: datetime | None = None
        self.terminal: tuple[str, str | None] | None = None  # (condition, reason)
        self.succeeded: set[int] = set()
        self.failed_indexes: set[int] = set()
        self.index_failures: dict[int, int] = {}
        self.failed_pods = 0  # counted failures, as .status.failed
        self.pods: list[LocalPod] = []
        self.events: list[dict[str, Any]] = []  # v1 Event dicts (Job's and its pods')
        self.dirty = True
        self._fail_job: str | None = None  # message of a matched FailJob rule

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def finished(self) -> bool:
        return self.terminal is not None

    def add_event(self, payload: dict[str, Any]) -> None:
        self.events.append(payload)
        del self.events[:-MAX_EVENTS_PER_JOB]
        self.dirty = True

    def put_event(self, payload: dict[str, Any]) -> None:
        """Keep an Event; an update of a stored one (same name) replaces it in place."""
        name = (payload.get("metadata") or {}).get("name")
        for i in range(len(self.events) - 1, -1, -1):
            if (self.events[i].get("metadata") or {}).get("name") == name:
                self.events[i] = payload
                self.dirty = True
                return
        self.add_event(payload)

    def live_pods(self) -> list[LocalPod]:
        return [p for p in self.pods if not p.terminal]

    def active_pods(self) -> list[LocalPod]:
        return [p for p in self.pods if p.active]

    def pending_indexes(self) -> list[int]:
        held = {p.index for p in self.live_pods()} | self.succeeded | self.failed_indexes
        return [i for i in range(self.spec.completions) if i not in held]

    def indexes_to_start(self) -> list[int]:
        """Lowest pending indexes, as many as parallelism leaves room for."""
        if self.finished or self.suspended:
            return []
        room = self.parallelism - len(self.live_pods())
        return self.pending_indexes()[: max(room, 0)]

    def new_pod(self, index: int, now: datetime, log_dir: Path, rng: random.Random) -> LocalPod:
        """Add a Pending pod attempt for an index (labelled as the Job controller does)."""
        existing = {p.name for p in self.pods}
        name = pod_name(self.name, index, rng)
        while name in existing:
            name = pod_name(self.name, index, rng)
        labels = {
            **self.spec.pod_labels,
            "batch.kubernetes.io/controller-uid": self.uid,
            "batch.kubernetes.io/job-name": self.name,
            "batch.kubernetes.io/job-completion-index": str(index),
            "controller-uid": self.uid,
            "job-name": self.name,
        }
        pod = LocalPod(
            name=name,
            uid=str(uuid.uuid4()),
            job_name=self.name,
            index=index,
            cpu=self.spec.cpu,
            memory_gib=self.spec.memory_gib,
            created=now,
            log_path=log_dir / f"{name}.log",
            grace_seconds=self.spec.grace_seconds,
            labels=labels,
        )
        self.pods.append(pod)
        self.dirty = True
        return pod

    def pods_to_delete(self) -> list[LocalPod]:
        """Active pods beyond parallelism: unscheduled first, then the newest."""
        active = self.active_pods()
        if self.finished or self.suspended:
            return active
        excess = len(active) - self.parallelism
        if excess <= 0:
            return []
        active.sort(key=lambda p: (p.phase == "Running", -p.created.timestamp()))
        return active[:excess]

    @property
    def job_failed(self) -> bool:
        return self.terminal is not None and self.terminal[0] == "Failed"

    def on_pod_exit(self, pod: LocalPod, exit_code: int | None, now: datetime) -> None:
        """Record a pod that ended and apply the failure policy to it."""
        self.dirty = True
        pod.exit_code, pod.finished = exit_code, now
        # A preempted pod carries the DisruptionTarget condition, deleted since or not.
        conditions = {"DisruptionTarget"} if pod.disrupted else set()
        if pod.deleting:
            pod.phase, pod.reason = "Failed", "Deleted"
        elif pod.disrupted:  # a preempted pod fails whatever its exit code (graceful shutdown)
            pod.phase, pod.reason = "Failed", "DisruptionTarget"
        elif exit_code == 0:
            pod.phase, pod.reason = "Succeeded", "Completed"
            if not self.finished:
                self.succeeded.add(pod.index)
            return
        else:
            # The container runtime's reason: OOMKilled when the (simulated) OOM killer did it.
            pod.phase, pod.reason = (
                "Failed",
                pod.reason or ("OOMKilled" if pod.oom_killed else "Error"),
            )
        if self.job_failed:
            self._count_after_job_failure(exit_code, conditions)
            return
        if pod.deleting:  # scale-down or suspend: not counted (docs/local-cluster.md)
            return
        if self.finished or pod.index in self.succeeded or pod.index in self.failed_indexes:
            return
        spec = self.spec
        rule = match_failure_rule(spec.rules, exit_code, conditions, spec.container_name)
        action = rule.action if rule else "Count"
        log.info(
            "job %s index %d: pod %s failed (exit %s, %s): %s",
            self.name,
            pod.index,
            pod.name,
            exit_code,
            pod.reason,
            action,
        )
        if action == "Ignore":
            return
        self.failed_pods += 1
        if action == "FailJob" and rule is not None:
            # The Job controller's words: the namespaced pod and the rule's position.
            self._fail_job = (
                f"Container {spec.container_name} for pod {self.namespace}/{pod.name} failed "
                f"with exit code {exit_code} matching FailJob rule at index "
                f"{spec.rules.index(rule)}"
            )
        elif action == "FailIndex":
            self.failed_indexes.add(pod.index)
        else:
            failures = self.index_failures.get(pod.index, 0) + 1
            self.index_failures[pod.index] = failures
            limit = spec.backoff_limit_per_index
            if limit is not None and failures > limit:
                self.failed_indexes.add(pod.index)

    def _count_after_job_failure(self, exit_code: int | None, conditions: set[str]) -> None:
        """Kubernetes counts every pod that had not terminated when the Job failed as failed
        once it ends (the ones it deletes included), unless an Ignore rule matches it."""
        spec = self.spec
        rule = match_failure_rule(spec.rules, exit_code, conditions, spec.container_name)
        if rule is None or rule.action != "Ignore":
            self.failed_pods += 1

    def drop_unstarted(self, pod: LocalPod, now: datetime) -> None:
        """A pod deleted before its container started goes away at once; after the Job has
        failed it still counts as a failed pod, as on Kubernetes."""
        if self.job_failed:
            pod.finished = now
            self._count_after_job_failure(None, set())
        self.pods.remove(pod)
        self.dirty = True

    def check_terminal(self, now: datetime) -> tuple[str, str, str] | None:
        """If the Job has just finished: (condition, reason, event message)."""
        if self.finished:
            return None
        spec, failed = self.spec, len(self.failed_indexes)
        reason: str | None = None
        message = ""
        if self._fail_job is not None:
            reason, message = "PodFailurePolicy", self._fail_job
        elif spec.backoff_limit is not None and self.failed_pods > spec.backoff_limit:
            reason = "BackoffLimitExceeded"
        elif spec.max_failed_indexes is not None and failed > spec.max_failed_indexes:
            reason = "MaxFailedIndexesExceeded"
        elif len(self.succeeded) == spec.completions:
            self.terminal, self.completion_time = ("Complete", "CompletionsReached"), now
            self.dirty = True
            return "Complete", "Completed", "Job completed"
        elif failed and len(self.succeeded) + failed == spec.completions:
            reason = "FailedIndexes"
        if reason is None:
            return None
        self.terminal, self.dirty = ("Failed", reason), True
        return "Failed", reason, FAILED_MESSAGES.get(reason, message)

    def status(self) -> JobStatus:
        spec = self.spec
        active = self.active_pods()
        if self.terminal is not None:
            condition, reason = self.terminal
        elif self.suspended:
            condition, reason = "Suspended", "JobSuspended"
        else:
            condition = reason = None
        return JobStatus(
            name=spec.name,
            labels=dict(spec.labels),
            annotations=dict(spec.annotations),
            completions=spec.completions,
            parallelism=self.parallelism,
            suspended=self.suspended,
            active=len(active),
            ready=sum(1 for p in active if p.phase == "Running"),
            succeeded=len(self.succeeded),
            failed=self.failed_pods,
            completed_indexes=intervals.format(self.succeeded),
            failed_indexes=intervals.format(self.failed_indexes),
            condition=condition,
            reason=reason,
            start_time=self.start_time,
            completion_time=self.completion_time,
            created=self.created,
        )
