"""Pause and delete as the predecessor does them, on local Kubernetes (the real API server, Job
controller and garbage collector; the controller's RBAC as terraform deploys it): a delete
suspends the Job, removes its pods in one collection delete with grace 0 and the Job with
background propagation; a pause's drain removes a suspended Job's unfinished pods at once,
keeps its failed ones and releases those the Job-tracking finalizer holds. Every sweep is
scoped to the run's graph: a co-tenant's build in the namespace is never drained.

The pods wait for a file once sent SIGTERM (`TERM_WAIT`), within a grace period of 120 s: a
sweep that honoured their grace period would leave them running well past these tests' waits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.jobs.manifest import PREFIX, graph_scope
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import ON_SPOT, manifest, running, wait_for

GRACE = 120  # s: far beyond any wait below
FAST = 30.0  # s: what "at once" may take on a busy 2-core machine


def _job(name: str, graph: str, release: Path, env: dict[str, str] | None = None, **kw: Any):
    """A Job of graph `graph` whose pods carry its labels, as the controller's manifests do."""
    labels = {"run": "r1", **graph_scope(graph)}
    env = {"TERM_WAIT": str(release), "GO": str(release), **(env or {})}
    job = manifest(name, grace=GRACE, labels=labels, env=env, **kw)
    job["spec"]["template"]["metadata"]["labels"].update(labels)
    return job


def _raw_pods(c: KubeCluster, job_uid: str) -> list[dict[str, Any]]:
    """The Job's pods as the API server stores them (deletionTimestamp, finalizers)."""
    assert c.kube.admin is not None
    path = f"/api/v1/namespaces/{c.kube.namespace}/pods"
    query = f"?labelSelector=batch.kubernetes.io/controller-uid={job_uid}"
    return (c.kube.admin.request("GET", path + query) or {}).get("items") or []


def _unfinished(c: KubeCluster, job_uid: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in _raw_pods(c, job_uid)
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def test_a_delete_removes_the_jobs_pods_at_once_and_never_a_co_tenants(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, release = kube_cluster, tmp_path / "release"
    ours, theirs = unique("ours"), unique("cotenant")
    assert c.create_job(_job(ours, "graph-a", release, completions=2, parallelism=2))
    assert c.create_job(_job(theirs, "graph-b", release))
    try:
        job = c.get_job(ours)
        assert job is not None
        running(c, ours, 2)
        their_pods = {p.uid for p in running(c, theirs, 1)}
        c.cluster.delete_job(ours, graph_scope("graph-a"))
        # Gone within seconds, not after the pods' 120 s grace period.
        wait_for(lambda: c.get_job(ours) is None, FAST, f"job {ours} deleted")
        wait_for(lambda: not _raw_pods(c, job.uid), FAST, f"the pods of {ours} gone")
        # The co-tenant's Job and its running pod are untouched.
        other = c.get_job(theirs)
        assert other is not None and not other.suspended and other.active == 1
        left = [p for p in c.list_pods(theirs) if p.phase == "Running"]
        assert {p.uid for p in left} == their_pods
        assert all(p.labels[PREFIX + "graph"] == "graph-b" for p in left)
    finally:
        release.touch()


def test_a_pause_drains_the_running_pods_at_once_and_keeps_the_failed_one(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, release, name, theirs = kube_cluster, tmp_path / "release", unique("drain"), unique("cot")
    # Index 0 exits 42 at once (its index fails, no retry); indexes 1 and 2 run, and once sent
    # SIGTERM wait for `release`.
    assert c.create_job(
        _job(
            name,
            "graph-a",
            release,
            completions=3,
            parallelism=3,
            env={"EXIT_0": "42", "GO_0": str(tmp_path)},
        )
    )
    assert c.create_job(_job(theirs, "graph-b", release))
    try:
        job = c.get_job(name)
        assert job is not None
        running(c, theirs, 1)
        wait_for(
            lambda: [p for p in c.list_pods(name, index=0) if p.phase == "Failed"],
            what="index 0's pod failed",
        )
        running(c, name, 2)
        failed = {p.uid for p in c.list_pods(name) if p.phase == "Failed"}
        c.cluster.patch_job(name, suspend=True)
        c.cluster.drain_job(name, graph_scope("graph-a"))
        # Gone within seconds, not after their 120 s grace period.
        wait_for(lambda: not _unfinished(c, job.uid), FAST, f"the running pods of {name} gone")
        # The failed pod stays for `pipeline inspect`, and the Job with it, suspended.
        pods = c.list_pods(name)
        assert {p.uid for p in pods if p.phase == "Failed"} == failed and pods
        kept = c.get_job(name)
        assert kept is not None and kept.suspended and kept.active == 0
        # The co-tenant's build runs on.
        assert [p.phase for p in c.list_pods(theirs)] == ["Running"]
        assert not (c.get_job(theirs) or kept).suspended
    finally:
        release.touch()


def test_a_pause_releases_a_lost_nodes_pod_the_tracking_finalizer_holds(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, release, name = kube_cluster, tmp_path / "release", unique("held")
    # On a Spot node: the other tests' pods (on the on-demand node) are not lost with it.
    assert c.create_job(_job(name, "graph-a", release, pod_spec=ON_SPOT))
    try:
        job = c.get_job(name)
        assert job is not None
        (pod,) = running(c, name, 1)
        # Its node is lost (a Spot VM reclaimed), and the pod is deleted: no kubelet will
        # ever confirm it, and under a pod failure policy the Job controller counts it only
        # once it is Failed, so the tracking finalizer holds its object until the Node goes.
        c.lose_node([pod.name])
        c.cluster.delete_pod(pod.name)
        wait_for(
            lambda: any(p["metadata"].get("deletionTimestamp") for p in _raw_pods(c, job.uid)),
            what=f"pod {pod.name} marked for deletion",
        )
        c.cluster.patch_job(name, suspend=True)
        c.cluster.drain_job(name, graph_scope("graph-a"))
        # Released as the drain returns, not when the lost Node is deleted a minute later.
        assert [p["metadata"]["name"] for p in _raw_pods(c, job.uid)] == []
    finally:
        release.touch()
