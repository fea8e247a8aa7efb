"""A node's OOMKilling event on local Kubernetes, read through the GKE adapter as the
controller (its own service account under terraform's RBAC, which grants `list events` in
`default`, where events about Nodes are recorded), then matched to the pod it killed. The
event is written by hand in the shape node-problem-detector's kernel monitor posts (no such
monitor runs locally)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from adapters.local.kube_api import KubeApi
from shared.ports.cluster import PodInfo
from shared.reconcile.node_oom import node_oom_victims, parse_node_oom
from tests.builders.kube_cluster import KubeCluster


def test_the_controller_reads_a_nodes_oomkilling_event_and_matches_its_pod(
    kube_cluster: KubeCluster,
) -> None:
    c = kube_cluster
    admin = KubeApi.from_kubeconfig(c.kube.admin_kubeconfig)
    node = admin.request("GET", "/api/v1/nodes")["items"][0]["metadata"]["name"]
    now = datetime.now(UTC).replace(microsecond=0)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    name = f"{node}.oom-{uuid.uuid4().hex[:6]}"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "reason": "OOMKilling",
        "type": "Warning",
        "message": (
            "Out of memory: Killed process 4242 (python) total-vm:9245440kB, "
            "anon-rss:8123456kB, file-rss:0kB, shmem-rss:0kB"
        ),
        "source": {"component": "kernel-monitor", "host": node},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    admin.request("POST", "/api/v1/namespaces/default/events", event)
    try:
        events = c.cluster.node_oom_events()  # the controller's identity
        mine = [e for e in events if e["metadata"]["name"] == name]
        assert len(mine) == 1
        kill = parse_node_oom(mine[0])
        assert kill is not None and (kill.node, kill.at, kill.pid) == (node, now, 4242)
        # Matched to a pod SIGKILLed on that node at that time, not to one elsewhere.
        base = _pod(node, now)
        assert node_oom_victims([base, replace(base, uid="b", node="other")], [kill]) == {"a"}
    finally:
        admin.request("DELETE", f"/api/v1/namespaces/default/events/{name}", ok=(404,))


def _pod(node: str, finished: datetime) -> PodInfo:
    return PodInfo(
        name="p",
        uid="a",
        job_name="j",
        index=0,
        phase="Failed",
        cpu_request=1.0,
        memory_request_gib=1.0,
        finished=finished,
        exit_code=137,
        reason="Error",
        node=node,
    )
