"""Kubernetes events of the local cluster, as lossy as GKE's path makes them.

Every event (a Job's SuccessfulCreate, SuccessfulDelete, Completed, Suspended, Resumed and
Failed reasons; a pod's FailedScheduling or Killing) goes through Kubernetes' recorder model
(`adapters.local.cluster.event_recorder`: aggregation, dedupe, the per-source-and-object token
bucket of 25 and one per 5 minutes) unless `EventSettings.recorder` is None. What survives is kept
on its Job for `job_events` (as `kubectl get events` would show it). Job events are then written as
GKE's exporter writes them (`log_export.exported_log_entry`), given an `insertId` as
Cloud Logging does, and handed to `on_event`, the stand-in for the log sink whose filter
passes Job events only, after the sink's delay (drawn from `sink_delay_s`, 5 to 60 s by
default; entries may therefore arrive out of order, as they do on GKE).

`record_*` run under the cluster's lock and only queue; `flush` runs without it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from adapters.local.cluster.event_recorder import EventRecorderModel, RecorderSettings
from adapters.local.cluster.jobs import LocalJob
from adapters.local.cluster.pods import LocalPod
from adapters.local.log_export import (
    exported_log_entry,
    job_event,
    logging_received,
)

log = logging.getLogger("cave_pipeline.local_cluster")

# The realistic sink delay: Cloud Logging to Pub/Sub is near real time, ~99 % within 60 s.
DEFAULT_SINK_DELAY_S = (5.0, 60.0)


@dataclass(frozen=True)
class EventSettings:
    """How events travel. The default is GKE's behaviour; `instant()` is the explicit opt-out
    for tests of the cluster itself that need every event at once."""

    recorder: RecorderSettings | None = field(default_factory=RecorderSettings)
    sink_delay_s: tuple[float, float] = DEFAULT_SINK_DELAY_S
    seed: int | None = None

    def __post_init__(self) -> None:
        low, high = self.sink_delay_s
        if not 0 <= low <= high:
            raise ValueError(
                f"sink_delay_s must be (low, high) with 0 <= low <= high, got {self.sink_delay_s!r}"
            )

    @classmethod
    def instant(cls) -> EventSettings:
        """Every event passes and is delivered at once (NOT what GKE does)."""
        return cls(recorder=None, sink_delay_s=(0.0, 0.0))

    @classmethod
    def with_delay(cls, text: str) -> EventSettings:
        """Realistic recorder, sink delay from a setting: "5-60", "2" or "0"."""
        low, _, high = text.partition("-")
        try:
            pair = (float(low), float(high or low))
        except ValueError:
            raise ValueError(
                f"sink delay setting {text!r}: use seconds as LOW-HIGH (e.g. 5-60) or one number"
            ) from None
        return cls(sink_delay_s=pair)


class EventSink:
    def __init__(
        self,
        on_event: Callable[[dict[str, Any]], None] | None,
        *,
        project: str,
        cluster_name: str,
        location: str,
        namespace: str,
        settings: EventSettings | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.on_event = on_event
        self.settings = settings or EventSettings()
        self.namespace = namespace
        self._where = {"project": project, "cluster": cluster_name, "location": location}
        self._recorder = (
            EventRecorderModel(self.settings.recorder) if self.settings.recorder else None
        )
        self._clock = clock or (lambda: datetime.now(UTC))
        self._rng = random.Random(self.settings.seed)
        self._outbox: list[tuple[float, int, dict[str, Any]]] = []  # heap by due time
        self._seq = itertools.count()
        self._queue_lock = (
            threading.Lock()
        )  # the heap: pushed under the cluster's lock, popped without
        self._deliver_lock = threading.Lock()
        self.dropped = 0  # events the recorder's spam filter dropped

    def _record(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Through the recorder model; the stored Event, or None if dropped."""
        now = self._clock()
        if self._recorder is None:
            return event
        verdict = self._recorder.record(event, now)
        if verdict.event is None:
            self.dropped += 1
            obj = event["involvedObject"]
            log.debug(
                "event %s of %s %s dropped (spam filter)", event["reason"], obj["kind"], obj["name"]
            )
        return verdict.event

    def _job_event(
        self, job: LocalJob, reason: str, message: str, event_type: str
    ) -> dict[str, Any]:
        """A v1 Event about `job` (a pod's events are about its Job's pods), stamped now."""
        return job_event(
            namespace=self.namespace,
            job_name=job.name,
            job_uid=job.uid,
            reason=reason,
            message=message,
            event_type=event_type,
            now=self._clock(),
        )

    def record_job_event(
        self, job: LocalJob, reason: str, message: str, event_type: str = "Normal"
    ) -> None:
        """Record a Job event and queue its LogEntry for `on_event` (caller holds the lock)."""
        event = self._job_event(job, reason, message, event_type)
        stored = self._record(event)
        if stored is None:
            return
        job.put_event(stored)
        if self.on_event is not None:
            entry = logging_received(exported_log_entry(stored, **self._where), self._clock())
            low, high = self.settings.sink_delay_s
            due = time.monotonic() + (self._rng.uniform(low, high) if high > 0 else 0.0)
            with self._queue_lock:
                heapq.heappush(self._outbox, (due, next(self._seq), entry))

    def record_pod_event(
        self,
        job: LocalJob,
        pod: LocalPod,
        reason: str,
        message: str,
        *,
        component: str = "default-scheduler",
        event_type: str = "Warning",
    ) -> None:
        """Record an event about one of the Job's pods (kept, not published: the sink's
        filter passes Job events only)."""
        event = self._job_event(job, reason, message, event_type)
        event["metadata"]["name"] = f"{pod.name}.{event['metadata']['name'].split('.')[-1]}"
        event["involvedObject"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "namespace": self.namespace,
            "uid": pod.uid,
        }
        event["source"] = {"component": component}
        event["reportingComponent"] = component
        stored = self._record(event)
        if stored is not None:
            job.put_event(stored)

    def pending(self) -> int:
        """LogEntries still in the sink (recorded, not yet delivered)."""
        return len(self._outbox)

    def flush(self, everything: bool = False) -> None:
        """Deliver the entries whose sink delay is over (all of them with `everything`), in
        due order; call WITHOUT the cluster's lock. One deliverer at a time: a caller that
        finds another delivering leaves its entries to it (or to the scheduler's next pass).
        Exceptions from `on_event` are logged, never raised."""
        if self.on_event is None or not self._deliver_lock.acquire(blocking=False):
            return
        try:
            while True:
                with self._queue_lock:
                    if not self._outbox or not (
                        everything or self._outbox[0][0] <= time.monotonic()
                    ):
                        return
                    _, _, entry = heapq.heappop(self._outbox)
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
