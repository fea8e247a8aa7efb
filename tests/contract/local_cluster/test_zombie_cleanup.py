"""A lost node's processes run on as zombies (cut off from the API, not from Bigtable), also
once pod GC has removed their pods from the API; stopping the cluster still ends them. A chaos
demo stopped mid-run once left such a worker running for good (a `pod_hung` one, which never
ends by itself)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from adapters.local.process_groups import signal_group, start_ticks
from tests.builders.local_jobs import wait_for

SLEEPER = ["python3", "-c", "import time; print('running', flush=True); time.sleep(300)"]


def sleeper_pod(namespace: str, spot: bool = False) -> dict:
    """A bare pod named `zombie` that sleeps (on a Spot node if `spot`)."""
    spec: dict = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "unused", "command": SLEEPER}],
    }
    if spot:
        spec["tolerations"] = [{"key": "cloud.google.com/gke-spot", "operator": "Exists"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "zombie", "namespace": namespace},
        "spec": spec,
    }


def test_a_zombie_whose_pod_is_gone_ends_with_the_cluster(local_kubernetes, tmp_path: Path) -> None:
    from adapters.local.kubernetes import LocalKubernetes

    on_demand = [n for n in local_kubernetes.nodes if not n.spot][:1]
    kube = LocalKubernetes(tmp_path / "k", nodes=on_demand)
    kube.node_delete_after_s = 3600.0  # the Node stays; the pod goes by a force delete below
    with kube:
        api, ns = kube.admin, kube.namespace
        api.request("POST", f"/api/v1/namespaces/{ns}/pods", sleeper_pod(ns))
        pid = wait_for(lambda: kube.kubelet.running_pids().get("zombie"), what="the pod running")
        kube.lose_node(["zombie"], keep_running=True)
        api.request(
            "DELETE", f"/api/v1/namespaces/{ns}/pods/zombie", {"gracePeriodSeconds": 0}
        )  # what pod GC does to a pod of a Node that is gone
        wait_for(
            lambda: api.request("GET", f"/api/v1/namespaces/{ns}/pods/zombie", ok=(404,)) is None,
            what="the pod gone from the API",
        )
        time.sleep(1.0)  # the kubelet's watch sees the deletion
        assert start_ticks(pid) is not None, "a zombie runs on while the cluster does"
    outlived = start_ticks(pid) is not None
    if outlived:  # a failing test leaves nothing running either
        signal_group(pid, signal.SIGKILL)
    assert not outlived, "the zombie outlived the cluster"


def test_a_zombie_ends_a_while_after_its_node_is_deleted(local_kubernetes, tmp_path: Path) -> None:
    """A lost node's zombie runs on (cut off from the API) only until its VM goes too,
    `zombie_outlives_node_s` after its Node's deletion, as GKE's node repair recreates a
    partitioned VM: a hung zombie renewing its claim for ever held a chaos run's chunk, and
    its layer failed on one attempt after another. A test setting shortens both timings."""
    from adapters.local.kubernetes import LocalKubernetes

    spot = [n for n in local_kubernetes.nodes if n.spot][:1]
    kube = LocalKubernetes(tmp_path / "k", nodes=spot, node_delete_after_s=1.0)
    kube.zombie_outlives_node_s = 3.0
    with kube:
        api, ns = kube.admin, kube.namespace
        api.request("POST", f"/api/v1/namespaces/{ns}/pods", sleeper_pod(ns, spot=True))
        pid = wait_for(lambda: kube.kubelet.running_pids().get("zombie"), what="the pod running")
        lost_at = time.monotonic()
        kube.lose_node(["zombie"], keep_running=True)
        time.sleep(2.0)
        assert start_ticks(pid) is not None, "a zombie runs on after its loss"
        wait_for(lambda: start_ticks(pid) is None, what="the zombie ended with its VM", timeout=60)
        assert time.monotonic() - lost_at >= 4.0  # not before its Node went, and 3 s more
