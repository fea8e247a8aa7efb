"""`PodUsageReader` on Cloud Monitoring's GKE container metrics (docs/canary-and-rightsize.md):
`kubernetes.io/container/memory/used_bytes` (GAUGE, bytes; the `non-evictable` series: what
the kernel cannot reclaim, the memory an OOM kill is about) and
`kubernetes.io/container/cpu/core_usage_time` (CUMULATIVE, CPU seconds since the container
started) of the `k8s_container` resource, whose labels name the pod (`pod_name`),
`namespace_name` and `container_name`. GKE samples both every 60 s: a pod shorter than a
minute may have one point or none, and then has no figure (the sizing keeps the config's).

A pod's peak memory is the highest point of each of its containers, summed; its mean vCPU is,
for each container, the newest cumulative point over the span it covers (its interval's start
is the container's start), summed. Same REST pattern as the Bigtable monitor
(adapters.google.monitoring), whose paging and errors it reuses. A partial answer
(`executionErrors`, `unreachable`) raises PartialAnswer with the figures it holds and is not
remembered: the figures are lower bounds, and a retried reconcile reads again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.common.rest import HttpSession
from adapters.google.monitoring import (
    CloudMonitoring,
    partial_reason,
    point_value,
    rfc3339,
    stamp,
)
from shared.ports.cluster import PodInfo
from shared.ports.partial_answer import PartialAnswer
from shared.ports.pod_usage import PodLifeUsage

MEMORY_USED = "kubernetes.io/container/memory/used_bytes"
CPU_USAGE = "kubernetes.io/container/cpu/core_usage_time"
GIB = 1024**3
# Points are stamped at the sample's end, up to a sampling period after a pod was created.
LEAD_S = 60.0


class CloudPodUsage:
    """Lifetime usage of a Job's pods in `namespace` of the GKE cluster(s) of `project`.
    One read per Job and pod set: a repeated ask (a reconcile retried after a lost commit)
    is answered from memory."""

    def __init__(
        self,
        project: str,
        namespace: str,
        session: HttpSession | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.project, self.namespace, self.clock = project, namespace, clock
        self._monitoring = CloudMonitoring(session, clock=clock)
        self._lock = threading.Lock()
        self._read: dict[tuple[str, frozenset[str]], dict[str, PodLifeUsage]] = {}

    def life_usage(self, job_name: str, pods: Sequence[PodInfo]) -> dict[str, PodLifeUsage]:
        """Usage by pod name for `pods` of Job `job_name` that have points; PartialAnswer
        (with that usage, not remembered) when Monitoring answered in part."""
        names = frozenset(p.name for p in pods)
        if not names:
            return {}
        key = (job_name, names)
        with self._lock:
            if key in self._read:
                return self._read[key]
        stamps = [t for p in pods for t in (p.created, p.started) if t is not None]
        end = self.clock()
        start = (min(stamps) if stamps else end - timedelta(hours=1)) - timedelta(seconds=LEAD_S)
        memory, memory_partial = self._per_pod(MEMORY_USED, job_name, start, end, names, _peak)
        cpu, cpu_partial = self._per_pod(CPU_USAGE, job_name, start, end, names, _mean_rate)
        found = {
            name: PodLifeUsage(None if name not in memory else memory[name] / GIB, cpu.get(name))
            for name in sorted(set(memory) | set(cpu))
        }
        partial = [
            f"{what}: {why}"
            for what, why in (("memory", memory_partial), ("cpu", cpu_partial))
            if why
        ]
        if partial:
            raise PartialAnswer("; ".join(partial), found)
        with self._lock:
            self._read[key] = found
        return found

    def _per_pod(
        self,
        metric: str,
        job_name: str,
        start: datetime,
        end: datetime,
        names: frozenset[str],
        of_series: Callable[[list[dict[str, Any]]], float | None],
    ) -> tuple[dict[str, float], str]:
        """One figure a pod: `of_series` of each container's points, summed; and why the
        answer is partial ("" when complete)."""
        where = [
            f'metric.type="{metric}"',
            'resource.type="k8s_container"',
            f'resource.labels.namespace_name="{self.namespace}"',
            # A Job's pods are named <job>-<index>-<suffix>; the canary's <job>-canary-...
            # match this prefix too and are dropped below (not in `names`).
            f'resource.labels.pod_name=starts_with("{job_name}-")',
        ]
        if metric == MEMORY_USED:
            where.append('metric.labels.memory_type="non-evictable"')
        query = {
            "filter": " AND ".join(where),
            "interval.startTime": rfc3339(start),
            "interval.endTime": rfc3339(end),
            "view": "FULL",
        }
        out: dict[str, float] = {}
        pages = self._monitoring.time_series(self.project, query)
        for page in pages:
            for series in page.get("timeSeries") or []:
                pod = ((series.get("resource") or {}).get("labels") or {}).get("pod_name", "")
                value = of_series(series.get("points") or [])
                if pod in names and value is not None:
                    out[pod] = out.get(pod, 0.0) + value
        return out, partial_reason(pages)


def _peak(points: list[dict[str, Any]]) -> float | None:
    values = [v for p in points if (v := point_value(p)) is not None]
    return max(values) if values else None


def _mean_rate(points: list[dict[str, Any]]) -> float | None:
    """CPU seconds over the span of the newest cumulative point; None without a span."""
    newest: datetime | None = None
    rate = None
    for point in points:
        value, interval = point_value(point), point.get("interval") or {}
        if value is None or "startTime" not in interval:
            continue
        begin, finish = stamp(interval["startTime"]), stamp(interval["endTime"])
        span = (finish - begin).total_seconds()
        if span > 0 and (newest is None or finish > newest):
            newest, rate = finish, value / span
    return rate
