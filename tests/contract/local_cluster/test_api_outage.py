"""An API outage on local Kubernetes: the API server itself stopped and started again on its
port (`LocalKubernetes.api_outage`, the chaos kind `cluster_api_down`). The controller's calls
fail as `ClusterUnreachableError` meanwhile; the kubelet keeps its pods' processes running and
the Job controller picks the Job up where it was, so nothing is counted as failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.ports.cluster import ClusterUnreachableError
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import manifest, running, settled, wait_for

DOWN_S = 4.0


def test_a_stopped_api_server_is_unreachable_then_the_job_goes_on(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("outage")
    kube = c.kube
    go = tmp_path / "go"
    c.create_job(manifest(name, completions=2, parallelism=2, env={"GO": str(go)}))
    before = {p.name for p in running(c, name, 2)}
    old_pid = kube.pids()["kube-apiserver"]
    played = kube.outages_played

    kube.api_outage(DOWN_S)
    wait_for(lambda: "kube-apiserver" not in kube.pids(), what="the API server stopped")
    with pytest.raises(ClusterUnreachableError):
        c.get_job(name)
    wait_for(lambda: kube.outages_played == played + 1, what="the API server back")
    assert kube.pids()["kube-apiserver"] != old_pid

    # The same pods, still running: the kubelet kept their processes and resumed its watch.
    assert {p.name for p in running(c, name, 2)} == before
    go.touch()
    job = settled(c, name)
    assert (job.condition, job.completed_indexes, job.failed) == (
        "Complete",
        "0,1",
        0,
    )  # two adjacent indexes: no range


def test_a_cluster_stopped_during_an_outage_ends_it_without_a_restart(
    local_kubernetes, tmp_path: Path
) -> None:
    """Stopping mid-outage ends the outage thread at once (no API server started after the
    stop, nothing left running) instead of waiting the outage out."""
    from adapters.local.kubernetes import LocalKubernetes

    kube = LocalKubernetes(tmp_path / "k", nodes=local_kubernetes.nodes[:1])
    with kube:
        kube.api_outage(120.0)
        wait_for(lambda: "kube-apiserver" not in kube.pids(), what="the API server stopped")
        thread = kube._outage_thread
    assert thread is not None and not thread.is_alive()
    assert kube.outages_played == 0 and kube.control_plane is None


def test_a_lost_node_is_deleted_though_its_deletion_meets_an_outage(
    local_kubernetes, tmp_path: Path
) -> None:
    """The stack deletes a lost node's Node after `node_delete_after_s`, as GKE deletes a
    reclaimed Spot VM's. If that moment falls in an API outage, it retries until the API is
    back: before, it gave up, and the node's pods stayed terminating for good (a chaos run's
    retired Job never went, so its layer was never re-created)."""
    from adapters.gke.cluster import GkeCluster
    from adapters.local.kubernetes import LocalKubernetes
    from tests.builders.local_jobs import ON_SPOT

    spot = [n for n in local_kubernetes.nodes if n.spot][:1]
    kube = LocalKubernetes(tmp_path / "k", nodes=spot, node_delete_after_s=1.0)
    with kube:
        c = GkeCluster.from_kubeconfig(
            namespace=kube.namespace, config_file=str(kube.controller_kubeconfig)
        )
        name = unique("lost-in-outage")
        c.create_job(manifest(name, pod_spec=ON_SPOT, env={"GO": str(tmp_path / "go")}))
        (pod,) = running(c, name, 1)
        lost_node = pod.node
        kube.api_outage(DOWN_S)  # the Node's deletion, due in 1 s, meets the outage
        wait_for(lambda: "kube-apiserver" not in kube.pids(), what="the API server stopped")
        kube.lose_node([pod.name])
        wait_for(lambda: kube.outages_played == 1, what="the API server back", timeout=60)

        def nodes() -> set[str]:
            return {
                n["metadata"]["name"] for n in kube.admin.request("GET", "/api/v1/nodes")["items"]
            }

        wait_for(lambda: lost_node not in nodes(), what="the lost Node deleted", timeout=60)
        wait_for(lambda: len(nodes()) == 1, what="its replacement registered", timeout=60)
