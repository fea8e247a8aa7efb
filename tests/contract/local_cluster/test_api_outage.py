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
