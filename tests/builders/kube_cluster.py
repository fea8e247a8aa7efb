"""Local Kubernetes for contract tests: the GKE adapter on the session's control plane (as the
controller's service account, terraform's Role), its faults through Kubernetes' own mechanisms,
and the Job events the log sink published (no sink delay: these tests read what was sent).

Every Job a test creates through `create_job` is deleted afterwards; names must be unique per
test (the control plane lives for the session)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from adapters.gke.cluster import GkeCluster
from adapters.local.kube_api import KubeApi
from adapters.local.kubernetes import LocalKubernetes
from adapters.local.log_sink import EventLogSink


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@dataclass
class KubeCluster:
    """A `Cluster` (the GKE adapter) with the local faults and the published events."""

    kube: LocalKubernetes
    cluster: GkeCluster
    published: list[dict[str, Any]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    sink: EventLogSink | None = None

    def __getattr__(self, name: str) -> Any:  # the Cluster port, then the faults
        if name in ("preempt_pod", "kill_pod", "evict_pod", "lose_node", "preempt_random_pod"):
            return getattr(self.kube, name)
        return getattr(self.cluster, name)

    def create_job(self, manifest: dict[str, Any]) -> bool:
        self.created.append(manifest["metadata"]["name"])
        return self.cluster.create_job(manifest)

    def job_log_entries(self, job_name: str) -> list[dict[str, Any]]:
        """The LogEntries the sink published for one Job, in order of publication."""
        return [
            e
            for e in self.published
            if (e.get("jsonPayload", {}).get("involvedObject") or {}).get("name") == job_name
        ]

    def close(self) -> None:
        if self.sink is not None:
            self.sink.stop()
        for name in filter(None, self.created):
            self.cluster.delete_job(name)


def open_kube_cluster(kube: LocalKubernetes) -> KubeCluster:
    cluster = GkeCluster.from_kubeconfig(
        namespace=kube.namespace, config_file=str(kube.controller_kubeconfig)
    )
    out = KubeCluster(kube, cluster)
    out.sink = EventLogSink(
        KubeApi.from_kubeconfig(kube.admin_kubeconfig),
        kube.namespace,
        out.published.append,
        project="test",
        sink_delay_s=(0.0, 0.0),
    ).start()
    return out
