"""The kubelet's resource metrics endpoint (`/metrics/resource`), what metrics-server scrapes
on each node: the Prometheus text the kubelet serves, with the five series metrics-server
reads (node_cpu_usage_seconds_total, node_memory_working_set_bytes,
container_cpu_usage_seconds_total, container_memory_working_set_bytes,
container_start_time_seconds) and `resource_scrape_error`. Values come from /proc: a
container's process tree's CPU seconds and resident set (the process kubelet has no cgroups:
its working set is the tree's RSS). Pure: `render` has no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class ContainerSample:
    """One running container, measured now."""

    namespace: str
    pod: str
    container: str
    cpu_seconds: float  # cumulative core-seconds of its process tree
    working_set_bytes: int
    start_time_s: float  # since the epoch


_HELP = {
    "container_cpu_usage_seconds_total": (
        "counter",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
    ),
    "container_memory_working_set_bytes": (
        "gauge",
        "[STABLE] Current working set of the container in bytes",
    ),
    "container_start_time_seconds": (
        "gauge",
        "[STABLE] Start time of the container since unix epoch in seconds",
    ),
    "node_cpu_usage_seconds_total": (
        "counter",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
    ),
    "node_memory_working_set_bytes": ("gauge", "[STABLE] Current working set of the node in bytes"),
    "resource_scrape_error": (
        "gauge",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
    ),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(containers: Sequence[ContainerSample], now_ms: int) -> bytes:
    """The endpoint's body: each series with its HELP and TYPE, every sample stamped `now_ms`.
    The node's figures are its containers' sums (the process kubelet's node runs nothing else)."""
    series: dict[str, list[str]] = {name: [] for name in _HELP}
    for c in sorted(containers, key=lambda c: (c.namespace, c.pod, c.container)):
        labels = (
            f'{{container="{_escape(c.container)}",namespace="{_escape(c.namespace)}",'
            f'pod="{_escape(c.pod)}"}}'
        )
        series["container_cpu_usage_seconds_total"].append(f"{labels} {c.cpu_seconds!r} {now_ms}")
        series["container_memory_working_set_bytes"].append(
            f"{labels} {c.working_set_bytes} {now_ms}"
        )
        series["container_start_time_seconds"].append(f"{labels} {c.start_time_s!r} {now_ms}")
    series["node_cpu_usage_seconds_total"].append(
        f" {sum(c.cpu_seconds for c in containers)!r} {now_ms}"
    )
    series["node_memory_working_set_bytes"].append(
        f" {sum(c.working_set_bytes for c in containers)} {now_ms}"
    )
    series["resource_scrape_error"].append(" 0")
    lines = []
    for name, (kind, help_text) in _HELP.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{sample}" for sample in series[name]]
    return ("\n".join(lines) + "\n").encode()
