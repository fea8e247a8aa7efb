"""Cloud Monitoring's view of a Bigtable instance, through its REST API
(`projects.timeSeries.list`): the CPU load the ramp's gate reads on each reconcile, and over
a build's span the table's stored bytes and the instance's node count, which the bill prices
(docs/bigtable-ramp-and-bill.md).

REST through a google-auth `AuthorizedSession`, as the doctor calls Google's APIs, rather than
the `google-cloud-monitoring` client: google-auth is already in the functions' dependencies,
and the response is plain JSON a test answers from fixtures of the published shape
(tests/fixtures/monitoring/, written by hand from the `ListTimeSeriesResponse` schema).

An answer carrying `executionErrors` or `unreachable` regions is partial: its series may miss
points or whole clusters. Every reader here then raises `PartialAnswer` with what it read, and
caches nothing, so the next read asks again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from adapters.common.rest import HttpSession, RestApi, ServiceUnreachable
from shared.ports.bigtable_monitor import Sample
from shared.ports.partial_answer import PartialAnswer

API = "https://monitoring.googleapis.com/v3"
CPU_LOAD = "bigtable.googleapis.com/cluster/cpu_load"
NODE_COUNT = "bigtable.googleapis.com/cluster/node_count"
TABLE_BYTES = "bigtable.googleapis.com/table/bytes_used"
# Bigtable's metrics are sampled every 60 s and visible up to 180 s later: a load window of
# 5 minutes always holds the latest point.
LOAD_WINDOW_S = 300.0
ALIGN_S = 300  # the bill's series, 5-minute means (a multi-day build stays a few pages)
CACHE_S = 30.0  # one read serves the reconciles of half a tick (the events' bursts)
# A change of the load shows in the latest point after a sample (60 s), its delay (up to
# 180 s) and this adapter's cache: the gate's settle time between two steps down.
LOAD_LAG_S = 60.0 + 180.0 + CACHE_S


class MonitoringError(RuntimeError):
    """Cloud Monitoring refused the query (permission, bad filter): the message says which."""


def stamp(text: str) -> datetime:
    """A point's RFC 3339 time as a datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def rfc3339(at: datetime) -> str:
    """A time as the API's interval bounds take it (UTC, seconds)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def point_value(point: dict[str, Any]) -> float | None:
    """A point's numeric value (double, or int64 sent as a JSON string); None otherwise."""
    value = point.get("value") or {}
    for key in ("doubleValue", "int64Value"):  # int64 is a JSON string
        if key in value:
            return float(value[key])
    return None


def partial_reason(pages: list[dict[str, Any]]) -> str:
    """Why the `timeSeries.list` answer `pages` is partial ("" when it is complete): its
    `executionErrors` (google.rpc.Status, by message) and `unreachable` regions."""
    errors: list[str] = []
    regions: list[str] = []
    for page in pages:
        for status in page.get("executionErrors") or []:
            text = status.get("message") or f"code {status.get('code', '?')}"
            if text not in errors:
                errors.append(text)
        regions += [r for r in page.get("unreachable") or [] if r not in regions]
    parts = ([f"executionErrors: {'; '.join(errors)}"] if errors else []) + (
        [f"unreachable: {', '.join(regions)}"] if regions else []
    )
    return "; ".join(parts)


def samples(body: dict[str, Any]) -> list[list[Sample]]:
    """The points of each time series in a `timeSeries.list` response, oldest first (the API
    answers newest first); points without a numeric value are skipped."""
    out = []
    for series in body.get("timeSeries") or []:
        points = []
        for point in series.get("points") or []:
            value = point_value(point)
            if value is not None:
                points.append(Sample(stamp(point["interval"]["endTime"]), value))
        out.append(sorted(points, key=lambda s: s.at))
    return out


class CloudMonitoring:
    """`BigtableMonitor` on Cloud Monitoring. `session`: an authorized HTTP session (default:
    Application Default Credentials, made on first use); `clock` for the load window."""

    storage_exact = True
    storage_source = "Cloud Monitoring table/bytes_used"

    def __init__(
        self,
        session: HttpSession | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        cache_s: float = CACHE_S,
    ) -> None:
        self._session, self.clock, self.cache_s = session, clock, cache_s
        self.load_lag_s = LOAD_LAG_S - CACHE_S + cache_s
        self._lock = threading.Lock()
        self._cached: dict[tuple[str, str], tuple[float, float | None]] = {}

    def _api(self) -> RestApi:
        if self._session is None:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials, _ = google.auth.default(
                scopes=["https://www.googleapis.com/auth/monitoring.read"]
            )
            self._session = AuthorizedSession(credentials)
        return RestApi(self._session)

    def _list(self, project: str, query: dict[str, str]) -> list[dict[str, Any]]:
        """Every page of one `timeSeries.list`."""
        pages, token = [], ""
        while True:
            params = {**query, **({"pageToken": token} if token else {})}
            url = f"{API}/projects/{project}/timeSeries?{urlencode(params)}"
            reply = self._api().call("GET", url)
            if reply.status in (429, 500, 502, 503, 504):
                raise ServiceUnreachable(f"Cloud Monitoring: HTTP {reply.status}")
            if reply.status != 200:
                error = (reply.body or {}).get("error", {}) if isinstance(reply.body, dict) else {}
                raise MonitoringError(
                    f"Cloud Monitoring timeSeries.list in {project}: HTTP {reply.status} "
                    f"{error.get('message', '')}; the controller's service account needs "
                    "roles/monitoring.viewer"
                )
            pages.append(reply.body or {})
            token = (reply.body or {}).get("nextPageToken", "")
            if not token:
                return pages

    def time_series(self, project: str, query: dict[str, str]) -> list[dict[str, Any]]:
        """Every page of one `timeSeries.list` with `query` (filter, interval, aggregation):
        the raw responses, partial ones too (the caller checks `partial_reason`);
        MonitoringError names the role on a refusal."""
        return self._list(project, query)

    def _query(
        self, metric: str, labels: dict[str, str], start: datetime, end: datetime
    ) -> dict[str, str]:
        where = " AND ".join(f'resource.labels.{k}="{v}"' for k, v in labels.items())
        return {
            "filter": f'metric.type="{metric}" AND {where}',
            "interval.startTime": rfc3339(start),
            "interval.endTime": rfc3339(end),
            "view": "FULL",
        }

    def cpu_load(self, project: str, instance: str) -> float | None:
        """The latest CPU load of the instance's busiest cluster (cached `cache_s`). A partial
        answer raises PartialAnswer with the busiest load it holds (a lower bound), uncached."""
        key = (project, instance)
        with self._lock:
            hit = self._cached.get(key)
            if hit is not None and time.monotonic() - hit[0] < self.cache_s:
                return hit[1]
        end = self.clock()
        query = self._query(
            CPU_LOAD, {"instance": instance}, end - timedelta(seconds=LOAD_WINDOW_S), end
        )
        pages = self._list(project, query)
        latest = [s[-1].value for page in pages for s in samples(page) if s]
        load = max(latest) if latest else None
        if reason := partial_reason(pages):
            raise PartialAnswer(reason, load)
        with self._lock:
            self._cached[key] = (time.monotonic(), load)
        return load

    def _summed(
        self, project: str, metric: str, labels: dict[str, str], start: datetime, end: datetime
    ) -> list[Sample]:
        """One series: 5-minute means of each series, summed over the clusters. A partial
        answer raises PartialAnswer with the sums it holds (a cluster may be missing)."""
        query = {
            **self._query(metric, labels, start, end),
            "aggregation.alignmentPeriod": f"{ALIGN_S}s",
            "aggregation.perSeriesAligner": "ALIGN_MEAN",
            "aggregation.crossSeriesReducer": "REDUCE_SUM",
        }
        by_time: dict[datetime, float] = {}
        pages = self._list(project, query)
        for page in pages:
            for series in samples(page):
                for s in series:
                    by_time[s.at] = by_time.get(s.at, 0.0) + s.value
        summed = [Sample(at, v) for at, v in sorted(by_time.items())]
        if reason := partial_reason(pages):
            raise PartialAnswer(reason, summed)
        return summed

    def table_bytes(
        self, project: str, instance: str, table: str, start: datetime, end: datetime
    ) -> list[Sample]:
        """The table's bytes (all its clusters' replicas: each is billed) over the span."""
        labels = {"instance": instance, "table": table}
        return self._summed(project, TABLE_BYTES, labels, start, end)

    def node_counts(
        self, project: str, instance: str, start: datetime, end: datetime
    ) -> list[Sample]:
        """The instance's nodes over the span, from an hour before it (the count before)."""
        labels = {"instance": instance}
        return self._summed(project, NODE_COUNT, labels, start - timedelta(hours=1), end)
