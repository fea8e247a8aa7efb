"""The process kubelet's simulated OOM killer: a pod whose env asks for a peak memory above its
request is SIGKILLed and reported as the kubelet reports a container the kernel OOM-killed
(exit 137, reason OOMKilled); a pod whose request covers the peak runs normally, and an
ordinary SIGKILL stays an Error, a counted failure the Job retries."""

from __future__ import annotations

from pathlib import Path

from adapters.local.kubelet.container import PEAK_MEMORY_ENV
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import manifest, running, settled, wait_for


def test_a_pod_over_its_memory_is_oom_killed_and_one_with_room_completes(
    kube_cluster: KubeCluster,
) -> None:
    c, small, roomy = kube_cluster, unique("small"), unique("roomy")
    peak = {PEAK_MEMORY_ENV: "0.1"}  # GiB: above 64Mi, below 128Mi
    c.create_job(manifest(small, env=peak, memory="64Mi", backoff_limit_per_index=1))
    c.create_job(manifest(roomy, env=peak, memory="128Mi"))
    job = settled(c, small)
    assert (job.condition, job.failed_indexes, job.failed) == ("Failed", "0", 2)
    attempts = c.list_pods(small)
    assert len(attempts) == 2
    assert all((p.phase, p.exit_code, p.reason) == ("Failed", 137, "OOMKilled") for p in attempts)
    assert settled(c, roomy).condition == "Complete"
    assert [p.reason for p in c.list_pods(roomy)] == ["Completed"]


def test_an_ordinary_sigkill_is_an_error_and_a_counted_failure(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("plain")
    go = tmp_path / "go"
    c.create_job(manifest(name, env={"GO": str(go)}))  # backoffLimitPerIndex 1
    (pod,) = running(c, name, 1)
    assert c.kill_pod(pod.name)
    wait_for(lambda: (j := c.get_job(name)) is not None and j.failed == 1, what="the kill counted")
    [killed] = [p for p in c.list_pods(name) if p.name == pod.name]
    assert (killed.phase, killed.exit_code, killed.reason) == ("Failed", 137, "Error")
    assert not c.kill_pod(pod.name)  # terminal: nothing left to kill
    running(c, name, 1, exclude={pod.name})  # the index's one retry
    go.touch()
    job = settled(c, name)
    assert (job.condition, job.failed, job.failed_indexes) == ("Complete", 1, "")
