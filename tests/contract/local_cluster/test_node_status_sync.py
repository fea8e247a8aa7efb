"""The kubelet keeps its Node true: after an API outage longer than the node monitor's grace
period the node lifecycle controller leaves Ready "Unknown" (and the node tainted) until the
kubelet posts Ready again, and a Node deleted meanwhile is registered anew. Without this a
chaos demo stalled with every node NotReady and no pod scheduled."""

from __future__ import annotations

from pathlib import Path

from tests.builders.local_jobs import wait_for

WAIT_S = 35.0  # three of the kubelet's 10 s status checks, and some


def _ready(api, name: str) -> str:
    node = api.request("GET", f"/api/v1/nodes/{name}", ok=(404,))
    if node is None:
        return "absent"
    conditions = node.get("status", {}).get("conditions", [])
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "no condition")


def test_a_node_marked_unknown_is_posted_ready_and_a_deleted_one_registered_again(
    local_kubernetes, tmp_path: Path
) -> None:
    from adapters.local.kube_api import STRATEGIC
    from adapters.local.kubernetes import LocalKubernetes

    with LocalKubernetes(tmp_path / "k", nodes=local_kubernetes.nodes[:1]) as kube:
        api, name = kube.admin, kube.nodes[0].name
        wait_for(lambda: _ready(api, name) == "True", what="the node Ready")

        # What the node lifecycle controller writes when the node's heartbeat stops.
        unknown = {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
        }
        api.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {"status": {"conditions": [unknown]}},
            content_type=STRATEGIC,
        )
        assert _ready(api, name) == "Unknown"
        wait_for(lambda: _ready(api, name) == "True", WAIT_S, "the kubelet to post Ready")

        api.request("DELETE", f"/api/v1/nodes/{name}")
        wait_for(lambda: _ready(api, name) == "True", WAIT_S, "the node registered again")
        node = api.request("GET", f"/api/v1/nodes/{name}")
        assert node["status"]["nodeInfo"]["kubeletVersion"] == kube.kubelet.kubelet_version
