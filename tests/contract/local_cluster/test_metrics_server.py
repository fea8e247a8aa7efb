"""metrics.k8s.io on local Kubernetes as on GKE: metrics-server (built from its own module)
behind the API server's aggregation layer, scraping the process kubelet's
`/metrics/resource`. A pod burning one core shows in PodMetrics, read through the GKE
adapter (`pod_usage`, what `pipeline top` calls) as the operator's identity, terraform's Role;
the controller's Role has no such grant, and the API server says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.gke.cluster import GkeCluster
from shared.ports.cluster import MetricsUnavailableError
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import manifest, running, wait_for

# metrics-server reports a pod after two scrapes 15 s apart; 90 s is a failure, not a figure.
WAIT_S = 90.0
# One busy core until the test touches {stop}; "running" is the first line `running` waits for.
BURN = """
import os, time
print("running", flush=True)
end = time.time() + 120
while time.time() < end and not os.path.exists({stop!r}):
    pass
"""


def test_a_busy_pod_shows_in_the_metrics_api_through_the_gke_adapter(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("metrics")
    stop = tmp_path / "stop"
    c.create_job(
        manifest(
            name, command=["python3", "-c", BURN.format(stop=str(stop))], cpu="500m", memory="256Mi"
        )
    )
    (pod,) = running(c, name, 1)
    try:
        wait_for(c.kube.metrics_available, WAIT_S, "the metrics.k8s.io APIService Available")
        operator = GkeCluster.from_kubeconfig(
            namespace=c.kube.namespace, config_file=str(c.kube.operator_kubeconfig)
        )
        usage = wait_for(
            lambda: operator.pod_usage(name).get(pod.name), WAIT_S, "the pod in PodMetrics"
        )
        # One busy loop, measured by the kubelet from /proc over a 15 s window: up to a core,
        # less on a loaded machine (it read 0.47 beside a chaos demo), against ~0 for an idle
        # pod: what is read is the pod's own use, not a figure of our making.
        assert 0.1 < usage.cpu < 1.5, usage
        assert 0.005 < usage.memory_gib < 0.25, usage  # a Python interpreter's resident set
        with pytest.raises(MetricsUnavailableError, match="403"):
            c.pod_usage(name)  # the controller's identity: not granted
    finally:
        stop.touch()


def test_the_node_side_is_the_kubelets_resource_metrics(kube_cluster: KubeCluster) -> None:
    """Node metrics come from each node's scrape: every node with a running pod is listed."""
    api = kube_cluster.kube.admin
    wait_for(kube_cluster.kube.metrics_available, WAIT_S, "metrics.k8s.io Available")
    nodes = api.request("GET", "/apis/metrics.k8s.io/v1beta1/nodes")
    assert nodes["kind"] == "NodeMetricsList"
    for item in nodes["items"]:
        assert item["metadata"]["name"].startswith("gk3-")
        assert set(item["usage"]) == {"cpu", "memory"}
