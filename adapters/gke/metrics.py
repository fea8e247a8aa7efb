"""Per-pod usage on GKE: `metrics.k8s.io/v1beta1` PodMetrics (Autopilot runs metrics-server),
selected by the Job's `batch.kubernetes.io/controller-uid` label (its metadata.uid: a Job
re-created under the same name does not see the earlier one's pods); usage is summed over a pod's
containers. `parse_pod_metrics` is the pure half, `gke_pod_usage` the call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from adapters.gke.wire import cpu_cores, memory_gib
from shared.model.job_generation import pod_selector
from shared.ports.cluster import MetricsUnavailableError, PodUsage


def parse_pod_metrics(items: Iterable[Mapping[str, Any]]) -> dict[str, PodUsage]:
    """PodMetrics items (wire form) -> usage by pod name, summed over containers."""
    out: dict[str, PodUsage] = {}
    for item in items:
        name = (item.get("metadata") or {}).get("name", "")
        cpu = mem = 0.0
        for container in item.get("containers") or []:
            usage = container.get("usage") or {}
            cpu += cpu_cores(usage.get("cpu", 0))
            mem += memory_gib(usage.get("memory", 0))
        if name:
            out[name] = PodUsage(cpu, mem)
    return out


def gke_pod_usage(
    api_client: Any,
    namespace: str,
    job_name: str,
    request_timeout: float = 30.0,
    *,
    job_uid: str,
) -> dict[str, PodUsage]:
    """Current usage of a Job's pods from the metrics API (pods without a sample are absent:
    metrics-server reports a pod only after its first scrape, about a minute after start)."""
    from kubernetes.client import ApiException, CustomObjectsApi

    from adapters.gke.connection import translate

    action = f"read pod metrics of job {job_name} in namespace {namespace}"
    try:
        found = CustomObjectsApi(api_client).list_namespaced_custom_object(
            "metrics.k8s.io",
            "v1beta1",
            namespace,
            "pods",
            label_selector=pod_selector(job_uid),
            _request_timeout=request_timeout,
        )
    except Exception as e:
        if isinstance(e, ApiException) and e.status in (403, 404, 503):
            raise MetricsUnavailableError(
                f"{action}: the metrics API (metrics.k8s.io) answered {e.status} {e.reason}; "
                "on Autopilot it is built in (a pod shows about a minute after it starts), "
                "elsewhere install metrics-server; 403: your account needs `list` on "
                "pods.metrics.k8s.io"
            ) from e
        error = translate(e, action, api_client.configuration.host)
        if error is None:
            raise
        raise error from e
    return parse_pod_metrics(found.get("items") or [])
