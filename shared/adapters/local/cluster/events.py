"""Kubernetes events of the local cluster: kept per Job, and Job events published.

Job events (involvedObject kind Job: SuccessfulCreate, SuccessfulDelete, Completed, Suspended,
Resumed, and the Failed reasons) are built as the GKE event exporter's LogEntries
(`shared.job_events.make_log_entry`), kept on the Job for `job_events`, and queued for the
`on_event` callback, the stand-in for the log sink whose filter passes Job events only.
Pod events (the scheduler's FailedScheduling) are kept, not published.

`record_*` run under the cluster's lock and only queue; `flush` runs without it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from shared.adapters.local.cluster.jobs import LocalJob
from shared.adapters.local.cluster.pods import LocalPod
from shared.job_events import make_log_entry

log = logging.getLogger("cave_pipeline.local_cluster")


class EventSink:
    def __init__(
        self,
        on_event: Callable[[dict[str, Any]], None] | None,
        *,
        project: str,
        cluster_name: str,
        location: str,
        namespace: str,
    ) -> None:
        self.on_event = on_event
        self._where = {
            "project": project,
            "cluster": cluster_name,
            "location": location,
            "namespace": namespace,
        }
        self._outbox: deque[dict[str, Any]] = deque()
        self._deliver_lock = threading.Lock()

    def _entry(self, job: LocalJob, reason: str, message: str, event_type: str) -> dict[str, Any]:
        return make_log_entry(
            **self._where,
            job_name=job.name,
            job_uid=job.uid,
            reason=reason,
            message=message,
            event_type=event_type,
        )

    def record_job_event(
        self, job: LocalJob, reason: str, message: str, event_type: str = "Normal"
    ) -> None:
        """Keep a Job event and queue its LogEntry for `on_event` (caller holds the lock)."""
        entry = self._entry(job, reason, message, event_type)
        job.add_event(entry["jsonPayload"])
        if self.on_event is not None:
            self._outbox.append(entry)

    def record_pod_event(self, job: LocalJob, pod: LocalPod, reason: str, message: str) -> None:
        """Keep a scheduler event about one of the Job's pods (not published)."""
        payload = self._entry(job, reason, message, "Warning")["jsonPayload"]
        payload["involvedObject"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "namespace": self._where["namespace"],
            "uid": pod.uid,
        }
        payload["source"] = {"component": "default-scheduler"}
        payload["reportingComponent"] = "default-scheduler"
        job.add_event(payload)

    def flush(self) -> None:
        """Deliver queued entries in order; call WITHOUT the cluster's lock. One deliverer at
        a time: a caller that finds another delivering leaves its entries to it (or to the
        scheduler's next pass). Exceptions from `on_event` are logged, never raised."""
        if self.on_event is None or not self._deliver_lock.acquire(blocking=False):
            return
        try:
            while self._outbox:
                entry = self._outbox.popleft()
                try:
                    self.on_event(entry)
                except Exception:
                    payload = entry["jsonPayload"]
                    log.exception(
                        "on_event failed for the %s event of job %s",
                        payload["reason"],
                        payload["involvedObject"]["name"],
                    )
        finally:
            self._deliver_lock.release()
