"""The Nodes the process kubelet serves, as GKE Autopilot labels and sizes them, and their
Leases in `kube-node-lease` (what the node lifecycle controller reads as the heartbeat).
Pure builders; `kubelet.py` writes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

LEASE_DURATION_S = 40  # the kubelet's default nodeLeaseDurationSeconds
RENEW_EVERY_S = 10.0  # the kubelet renews at a quarter of the duration
SPOT_KEY = "cloud.google.com/gke-spot"
CLASS_KEY = "cloud.google.com/compute-class"
ZONE_KEY = "topology.kubernetes.io/zone"


@dataclass(frozen=True)
class NodeSpec:
    """One node: its name, size, and whether it is a Spot VM (label and taint as on GKE)."""

    name: str
    cpu: float = 2.0
    memory_gib: float = 8.0
    spot: bool = True
    zone: str = "local-a"
    compute_class: str = "autopilot"
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)


def micro_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_object(spec: NodeSpec, port: int) -> dict[str, Any]:
    """The Node as a kubelet registers it (metadata and spec; status is written apart)."""
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "ek-standard",
        ZONE_KEY: spec.zone,
        "topology.kubernetes.io/region": spec.zone.rsplit("-", 1)[0],
        CLASS_KEY: spec.compute_class,
        "cloud.google.com/gke-provisioning": "spot" if spec.spot else "standard",
        **({SPOT_KEY: "true"} if spec.spot else {}),
        **spec.labels,
    }
    taints = [{"key": SPOT_KEY, "value": "true", "effect": "NoSchedule"}] if spec.spot else []
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {"taints": taints} if taints else {},
    }


def node_status(spec: NodeSpec, port: int, now: datetime, ready: bool = True) -> dict[str, Any]:
    """The Node's status: capacity, allocatable, addresses, the kubelet's port (for logs) and
    the conditions a healthy kubelet reports."""
    capacity = {
        "cpu": f"{int(spec.cpu * 1000)}m",
        "memory": f"{int(spec.memory_gib * 1024)}Mi",
        "pods": str(spec.pods),
        "ephemeral-storage": "100Gi",
    }
    stamp = micro_time(now).split(".")[0] + "Z"

    def cond(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }

    return {
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": spec.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {
                "machineID": spec.name,
                "systemUUID": spec.name,
                "bootID": spec.name,
                "kernelVersion": "",
                "osImage": "cave-pipeline process kubelet",
                "containerRuntimeVersion": "process://local",
                "kubeletVersion": "v1.34.4",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "conditions": [
                cond(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                cond(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                cond(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                cond(
                    "Ready",
                    "True" if ready else "False",
                    "KubeletReady" if ready else "KubeletNotReady",
                    "kubelet is posting ready status",
                ),
            ],
        }
    }


def lease_object(name: str, now: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION_S,
            "renewTime": micro_time(now),
        },
    }
