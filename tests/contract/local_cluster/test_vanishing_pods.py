"""Pods that vanish, as on GKE: scale-down and suspend (the Job controller deletes them), and a
lost node (its Node deleted, the pod GC deletes its pods); their logs go with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.ports.cluster import ClusterError
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import (
    ON_SPOT,
    conditions,
    manifest,
    reasons,
    running,
    settled,
    wait_for,
)


def gone_with_logs(c: KubeCluster, job_name: str, pod_name: str) -> bool:
    """Not listed, and `kubectl logs` has nothing to show."""
    if any(p.name == pod_name for p in c.list_pods(job_name)):
        return False
    try:
        c.pod_log(pod_name)
    except ClusterError:
        return True
    return False


def test_parallelism_up_starts_pods_and_down_deletes_the_newest(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("scale")
    go = tmp_path / "go"
    c.create_job(manifest(name, completions=4, parallelism=1, env={"GO": str(go)}))
    running(c, name, 1)
    c.patch_job(name, parallelism=3)
    job = c.get_job(name)
    assert job is not None and job.parallelism == 3
    pods = running(c, name, 3)
    assert sorted(p.index for p in pods) == [0, 1, 2]
    c.patch_job(name, parallelism=1)
    # Deleted by the Job controller (the newest first), terminated, gone with their logs.
    wait_for(lambda: len(c.list_pods(name)) == 1, what="two pods deleted")
    assert [p.index for p in c.list_pods(name)] == [0]
    deleted = {p.name for p in pods} - {p.name for p in c.list_pods(name)}
    assert len(deleted) == 2 and all(gone_with_logs(c, name, n) for n in deleted)
    job = c.get_job(name)
    # Not failures: the controller removes their tracking finalizer before deleting them.
    assert job is not None and (job.active, job.failed, job.failed_indexes) == (1, 0, "")
    assert reasons(c.job_events(name)).count("SuccessfulDelete") == 2
    go.touch()
    job = settled(c, name)
    assert (job.condition, job.completed_indexes, job.failed) == ("Complete", "0-3", 0)
    assert [len(c.list_pods(name, index=i)) for i in range(4)] == [1, 1, 1, 1]


def test_suspend_keeps_progress_and_resume_continues(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("pause")
    go = str(tmp_path / "go")
    c.create_job(manifest(name, completions=3, parallelism=2, env={"GO_1": go, "GO_2": go}))
    wait_for(lambda: (j := c.get_job(name)) and j.completed_indexes == "0", what="index 0 done")
    running(c, name, 2)
    c.patch_job(name, suspend=True)
    job = c.get_job(name)
    assert (
        job is not None
        and job.suspended
        and (job.condition, job.reason)
        == (
            "Suspended",
            "JobSuspended",
        )
    )
    assert not job.finished
    # The active pods are deleted: gone once terminated; the finished one stays.
    wait_for(lambda: [p.index for p in c.list_pods(name)] == [0], what="pods gone")
    wait_for(lambda: ("Suspended", "JobSuspended") in conditions(c, name), what="seen suspended")
    job = c.get_job(name)
    assert job is not None and (job.active, job.failed, job.completed_indexes) == (0, 0, "0")
    c.patch_job(name, suspend=False)
    Path(go).touch()
    job = settled(c, name)
    assert (job.condition, job.completed_indexes, job.failed) == ("Complete", "0-2", 0)
    assert [len(c.list_pods(name, index=i)) for i in range(3)] == [1, 1, 1]
    evs = reasons(c.job_events(name))
    assert {"Suspended", "Resumed"} <= set(evs) and evs.count("SuccessfulDelete") == 2
    published = [e["jsonPayload"]["reason"] for e in c.job_log_entries(name)]
    assert {"Suspended", "Resumed"} <= set(published)


def test_a_job_created_suspended_starts_no_pods_until_resumed(kube_cluster: KubeCluster) -> None:
    c, name = kube_cluster, unique("later")
    c.create_job(manifest(name, completions=2, parallelism=2, suspend=True))
    # Once the Job controller has synced it (its Suspended condition), it has made no pods.
    wait_for(lambda: ("Suspended", "JobSuspended") in conditions(c, name), what="seen suspended")
    job = c.get_job(name)
    assert job is not None and c.list_pods(name) == [] and job.start_time is None
    assert job.condition == "Suspended" and reasons(c.job_events(name)) == ["Suspended"]
    c.patch_job(name, suspend=False)
    job = settled(c, name)
    assert job.condition == "Complete" and job.start_time is not None


def test_a_lost_node_keeps_running_its_pods_unseen_and_the_job_replaces_them(
    kube_cluster: KubeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Spot VM reclaimed without notice: its kubelet falls silent, its processes run on cut
    # off from the API (a partition), its Node is deleted; the pod GC (after its own 40 s
    # quarantine of a missing node) fails and deletes the pod, DisruptionTarget
    # DeletionByPodGC, which the Job's Ignore rule replaces for free. GKE deletes the Node
    # within a minute or two; here at once, the pod GC's quarantine is wait enough.
    monkeypatch.setattr(kube_cluster.kube, "node_delete_after_s", 1.0)
    c, name = kube_cluster, unique("lost")
    go, marks = tmp_path / "go", tmp_path / "marks"
    marks.mkdir()
    code = (
        "import os, pathlib, time\n"
        "print('running', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        f"pathlib.Path({str(marks)!r}, os.environ['POD_NAME']).touch()\n"
    )
    # On a Spot node: the other tests' pods (on the on-demand node) are not lost with it.
    body = manifest(name, command=["python", "-c", code], pod_spec=ON_SPOT)
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]
    c.create_job(body)
    (pod,) = running(c, name, 1)
    assert c.lose_node([pod.name], keep_running=True) == [pod.name]
    (replacement,) = running(c, name, 1, exclude={pod.name})
    assert replacement.node != pod.node
    assert gone_with_logs(c, name, pod.name)
    go.touch()
    job = settled(c, name)
    assert (job.condition, job.failed, job.completed_indexes) == ("Complete", 0, "0")
    # Both attempts wrote: the lost one ran on, unseen by the API.
    wait_for(lambda: (marks / pod.name).exists(), what="the partitioned pod's write")
    assert (marks / replacement.name).exists()
    assert [p.name for p in c.list_pods(name)] == [replacement.name]
