"""In-place resize on the real API server (v1.34) and the process kubelet: the GKE adapter's
PATCH of the pod `resize` subresource as the controller's service account (terraform's Role
grants `pods/resize`), the new requests in the pod's spec, the kubelet actuating them
(`containerStatuses[].resources`, `allocatedResources`, `observedGeneration`); and what the API
server refuses with 422 (a resize that would change the pod's QoS class) read as unsupported
(docs/cli.md#steering-a-build)."""

from __future__ import annotations

from pathlib import Path

from shared.ports.cluster import ResizeOutcome
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import manifest, running, settled, wait_for


def _pod(c: KubeCluster, name: str) -> dict:
    return c.kube.admin.request("GET", f"/api/v1/namespaces/{c.kube.namespace}/pods/{name}")


def test_a_running_pod_is_resized_in_place_and_the_kubelet_reports_it(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, job, go = kube_cluster, unique("resize"), tmp_path / "go"
    c.create_job(manifest(job, env={"GO": str(go)}, cpu="100m", memory="64Mi"))
    (pod,) = running(c, job, 1)
    before = _pod(c, pod.name)
    assert before["status"]["containerStatuses"][0]["allocatedResources"] == {
        "cpu": "100m",
        "memory": "64Mi",
    }
    new = {"requests": {"cpu": "250m", "memory": "128Mi"}}
    assert c.resize_pod(pod.name, "worker", new) is ResizeOutcome.RESIZED
    (listed,) = [p for p in c.list_pods(job) if p.name == pod.name]
    assert (listed.cpu_request, listed.memory_request_gib) == (0.25, 0.125)  # the spec's

    def actuated() -> dict | None:
        obj = _pod(c, pod.name)
        status = obj["status"]
        done = status["containerStatuses"][0].get("resources") == new
        return (
            obj
            if done and status.get("observedGeneration") == obj["metadata"]["generation"]
            else None
        )

    after = wait_for(actuated, what="the kubelet to report the resize")
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert after["status"]["containerStatuses"][0]["allocatedResources"] == new["requests"]
    assert (after["metadata"]["uid"], after["status"]["phase"]) == (
        pod.uid,
        "Running",
    )  # the same pod
    go.touch()
    assert settled(c, job).condition == "Complete"


def test_a_resize_the_api_server_refuses_is_unsupported(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, job, go = kube_cluster, unique("noresize"), tmp_path / "go"
    c.create_job(manifest(job, env={"GO": str(go)}))  # Burstable: requests, no limits
    (pod,) = running(c, job, 1)
    # limits = requests would make it Guaranteed: a resize may never change the QoS class (422)
    guaranteed = {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "100m", "memory": "64Mi"},
    }
    assert c.resize_pod(pod.name, "worker", guaranteed) is ResizeOutcome.UNSUPPORTED
    spec = _pod(c, pod.name)["spec"]["containers"][0]["resources"]
    assert spec == {"requests": {"cpu": "100m", "memory": "64Mi"}}  # unchanged
    go.touch()
    settled(c, job)
