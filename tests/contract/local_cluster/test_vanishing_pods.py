"""Pods that vanish as in Kubernetes: scale-down, suspend, pod GC, a lost node (logs too)."""

from __future__ import annotations

from pathlib import Path

from adapters.local.cluster.local_cluster import LocalCluster

from shared.ports.cluster import ClusterError
from tests.builders.local_jobs import (
    finished,
    manifest,
    reasons,
    running,
    wait_for,
)


def test_parallelism_up_starts_pods_and_down_deletes_the_newest(cluster, tmp_path) -> None:
    c, _ = cluster
    go = tmp_path / "go"
    c.create_job(manifest("scale", completions=4, parallelism=1, env={"GO": str(go)}))
    running(c, "scale", 1)
    c.patch_job("scale", parallelism=3)
    assert c.get_job("scale").parallelism == 3
    pods = running(c, "scale", 3)
    assert sorted(p.index for p in pods) == [0, 1, 2]
    c.patch_job("scale", parallelism=1)
    # Deleted by the Job controller, terminated, gone from the API with their logs.
    wait_for(lambda: len(c.list_pods("scale")) == 1, what="two pods deleted")
    assert [p.index for p in c.list_pods("scale")] == [0]
    deleted = {p.name for p in pods} - {p.name for p in c.list_pods("scale")}
    assert len(deleted) == 2 and all(gone_with_logs(c, name) for name in deleted)
    job = c.get_job("scale")
    assert (job.active, job.failed, job.failed_indexes) == (1, 0, "")
    assert reasons(c.job_events("scale")).count("SuccessfulDelete") == 2
    go.touch()
    job = finished(c, "scale")
    assert (job.condition, job.completed_indexes, job.failed) == ("Complete", "0-3", 0)
    assert [len(c.list_pods("scale", index=i)) for i in range(4)] == [1, 1, 1, 1]


def test_suspend_deletes_active_pods_keeps_progress_and_resume_continues(cluster, tmp_path) -> None:
    c, published = cluster
    go = str(tmp_path / "go")
    c.create_job(manifest("pause", completions=3, parallelism=2, env={"GO_1": go, "GO_2": go}))
    wait_for(lambda: c.get_job("pause").completed_indexes == "0", what="index 0 done")
    running(c, "pause", 2)
    c.patch_job("pause", suspend=True)
    job = c.get_job("pause")
    assert job.suspended and (job.condition, job.reason) == ("Suspended", "JobSuspended")
    assert not job.finished
    # The active pods are deleted: gone once terminated; the finished one stays.
    wait_for(lambda: [p.index for p in c.list_pods("pause")] == [0], what="pods gone")
    c.wait_ticks(5)
    assert [p.index for p in c.list_pods("pause")] == [0]  # a suspended Job starts no pods
    job = c.get_job("pause")
    assert (job.active, job.failed, job.completed_indexes) == (0, 0, "0")
    assert reasons(c.job_events("pause")).count("Killing") == 2  # the kubelet's pod events
    c.patch_job("pause", suspend=False)
    Path(go).touch()
    job = finished(c, "pause")
    assert (job.condition, job.completed_indexes, job.failed) == ("Complete", "0-2", 0)
    evs = reasons(c.job_events("pause"))
    assert evs.index("Suspended") < evs.index("Resumed")
    assert evs.count("SuccessfulDelete") == 2
    assert {"Suspended", "Resumed"} <= set(reasons([e["jsonPayload"] for e in published]))


def test_a_job_created_suspended_starts_no_pods_until_resumed(cluster) -> None:
    c, _ = cluster
    c.create_job(manifest("later", completions=2, parallelism=2, suspend=True))
    c.wait_ticks(5)
    job = c.get_job("later")
    assert c.list_pods("later") == [] and job.suspended and job.start_time is None
    assert job.condition == "Suspended" and reasons(c.job_events("later")) == ["Suspended"]
    c.patch_job("later", suspend=False)
    job = finished(c, "later")
    assert job.condition == "Complete" and job.start_time is not None


def gone_with_logs(c: LocalCluster, pod_name: str) -> bool:
    """Not listed, and `kubectl logs` has nothing to show."""
    if any(p.name == pod_name for job in c.list_jobs({}) for p in c.list_pods(job.name)):
        return False
    try:
        c.pod_log(pod_name)
    except ClusterError:
        return True
    return False


def test_pod_gc_deletes_the_oldest_terminated_pods_beyond_its_threshold(make_cluster) -> None:
    c, _ = make_cluster(pod_gc_threshold=2)
    c.create_job(manifest("gc", completions=4, parallelism=1))
    job = finished(c, "gc")
    assert (job.condition, job.completed_indexes, job.succeeded) == ("Complete", "0-3", 4)
    wait_for(lambda: len(c.list_pods("gc")) == 2, what="the pod GC")
    assert sorted(p.index for p in c.list_pods("gc")) == [2, 3]  # the oldest went first
    kept = c.list_pods("gc")
    assert all(c.pod_log(p.name).startswith("index") for p in kept)


def test_a_lost_node_deletes_its_pods_and_logs_and_the_job_replaces_them(cluster, tmp_path) -> None:
    c, _ = cluster
    go = tmp_path / "go"
    c.create_job(manifest("lost", completions=2, parallelism=2, env={"GO": str(go)}))
    before = {p.name for p in running(c, "lost", 2)}
    assert sorted(c.lose_node()) == sorted(before)
    assert not before & {p.name for p in c.list_pods("lost")}
    assert all(gone_with_logs(c, name) for name in before)
    after = running(c, "lost", 2)  # replaced: DisruptionTarget is ignored by the policy
    assert sorted(p.index for p in after) == [0, 1] and not before & {p.name for p in after}
    go.touch()
    job = finished(c, "lost")
    assert (job.condition, job.failed, job.completed_indexes) == ("Complete", 0, "0,1")


def test_a_partitioned_node_keeps_running_its_pods_unseen(cluster, tmp_path) -> None:
    c, _ = cluster
    go, marks = tmp_path / "go", tmp_path / "marks"
    marks.mkdir()
    code = (
        "import os, pathlib, time\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        f"pathlib.Path({str(marks)!r}, os.environ['HOSTNAME']).touch()\n"
    )
    c.create_job(manifest("part", command=["python", "-c", code]))
    (pod,) = running_no_log(c, "part")
    assert c.lose_node([pod.name], keep_running=True) == [pod.name]
    (replacement,) = running_no_log(c, "part")
    go.touch()
    assert finished(c, "part").condition == "Complete"
    # both attempts wrote: the lost one ran on, unseen by the API
    wait_for(lambda: (marks / pod.name).exists(), what="the partitioned pod's write")
    assert (marks / replacement.name).exists()
    assert [p.name for p in c.list_pods("part")] == [replacement.name]


def running_no_log(c: LocalCluster, name: str) -> list:
    return wait_for(
        lambda: [p for p in c.list_pods(name) if p.phase == "Running"] or None,
        what=f"a running pod of {name}",
    )
