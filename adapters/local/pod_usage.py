"""Cloud Monitoring's part of pod usage on the local stack: what the process kubelet measured
of each pod over its life (its peak resident memory and mean vCPU, from /proc), kept after the
pod is gone as Monitoring keeps its points. The controller reads it through the same port as
GKE's container metrics (`shared.ports.pod_usage.PodUsageReader`)."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.local.kubelet.kubelet import ProcessKubelet
from shared.ports.cluster import PodInfo
from shared.ports.pod_usage import PodLifeUsage


class KubeletPodUsage:
    """`PodUsageReader` over the process kubelet's measurements."""

    def __init__(self, kubelet: ProcessKubelet) -> None:
        self.kubelet = kubelet

    def life_usage(self, job_name: str, pods: Sequence[PodInfo]) -> dict[str, PodLifeUsage]:
        out = {}
        for pod in pods:
            peak, cpu = self.kubelet.life_usage(pod.name)
            if peak is not None or cpu is not None:
                out[pod.name] = PodLifeUsage(peak_memory_gib=peak, cpu_used=cpu)
        return out
