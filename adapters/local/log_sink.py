"""The log sink of the local stack, what Google adds to Kubernetes: the API server's Job Events,
written as GKE's event exporter writes them (`adapters.local.log_export.exported_log_entry`),
stored as Cloud Logging stores them (`insertId`, `receiveTimestamp`), and handed to `publish`
(the `job-events` topic) after the sink's delay, drawn per entry (entries may arrive out of
order, as on GKE).

The Events are the real ones: the Job controller's recorder aggregates and rate-limits them
(a burst of 25 per Job, then one per 5 minutes), so a Job of more than 25 pods loses its later
events here as on GKE. Each update of an Event (its count grows) is exported again, as the
exporter does.
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
from typing import Any

from adapters.local.kube_api import KubeApi
from adapters.local.log_export import exported_log_entry, logging_received

log = logging.getLogger("cave_pipeline.log_sink")

DEFAULT_SINK_DELAY_S = (5.0, 60.0)  # Cloud Logging to Pub/Sub: ~99 % within 60 s


def parse_sink_delay(text: str) -> tuple[float, float]:
    """A sink delay setting: "LOW-HIGH" seconds (e.g. 5-60) or one number; ValueError naming
    the form otherwise."""
    low, _, high = text.strip().partition("-")
    try:
        pair = (float(low), float(high or low))
    except ValueError:
        raise ValueError(
            f"sink delay setting {text!r}: use seconds as LOW-HIGH (e.g. 5-60) or one number"
        ) from None
    if not 0 <= pair[0] <= pair[1]:
        raise ValueError(f"sink delay setting {text!r}: want 0 <= LOW <= HIGH")
    return pair


@dataclass
class EventLogSink:
    """Watches one namespace's Job Events and publishes their LogEntries with a delay."""

    api: KubeApi
    namespace: str
    publish: Callable[[dict[str, Any]], None]
    project: str
    cluster: str = "local"
    location: str = "local"
    sink_delay_s: tuple[float, float] = DEFAULT_SINK_DELAY_S
    seed: int | None = None
    _queue: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _cv: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _rv: str = ""
    sent: int = 0

    def start(self) -> EventLogSink:
        self._rng = random.Random(self.seed)
        # From now on (listed before start returns, so nothing created after it is missed).
        self._rv = self.api.request("GET", self._path, query=self._selector)["metadata"][
            "resourceVersion"
        ]
        for target, name in ((self._watch, "log-sink-watch"), (self._deliver, "log-sink-deliver")):
            t = threading.Thread(target=target, daemon=True, name=name)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        """Stop, and close the sink's client (give it one of its own): the watch ends now."""
        self._stop.set()
        self.api.close()
        with self._cv:
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=5.0)

    @property
    def _path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/events"

    @property
    def _selector(self) -> dict[str, str]:
        return {"fieldSelector": "involvedObject.kind=Job"}

    def _watch(self) -> None:
        path, selector, rv = self._path, self._selector, self._rv
        while not self._stop.is_set():
            try:
                if not rv:  # too old (410): from now on; what happened meanwhile is lost
                    rv = self.api.request("GET", path, query=selector)["metadata"][
                        "resourceVersion"
                    ]
                for event in self.api.watch(path, {**selector, "resourceVersion": rv}, 60):
                    if self._stop.is_set():
                        return
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        rv = ""
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if kind in ("ADDED", "MODIFIED"):
                        self._enqueue(obj)
            except Exception as e:  # noqa: BLE001 - the API server is down: retry
                log.debug("event watch interrupted: %s", e)
                if self._stop.wait(0.5):
                    return

    def _enqueue(self, event: dict[str, Any]) -> None:
        entry = exported_log_entry(
            event, project=self.project, cluster=self.cluster, location=self.location
        )
        low, high = self.sink_delay_s
        due = time.monotonic() + (self._rng.uniform(low, high) if high > 0 else 0.0)
        with self._cv:
            heapq.heappush(self._queue, (due, next(self._counter), entry))
            self._cv.notify()

    def _deliver(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while not self._stop.is_set() and (
                    not self._queue or self._queue[0][0] > time.monotonic()
                ):
                    wait = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._cv.wait(timeout=wait)
                if self._stop.is_set():
                    return
                _, _, entry = heapq.heappop(self._queue)
            try:
                self.publish(logging_received(entry))
                self.sent += 1
            except Exception as e:  # noqa: BLE001 - a lost log entry, as a sink may lose one
                log.warning("log sink: publish failed: %s", e)
