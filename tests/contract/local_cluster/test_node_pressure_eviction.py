"""The process kubelet evicts a pod for node pressure as the kubelet does: the pod Failed with
status.reason `Evicted` and the kubelet's message, the DisruptionTarget condition with reason
TerminationByKubelet; the real Job controller's DisruptionTarget rule ignores it like a
preemption (the index is retried, no retry spent), however often it happens. A preemption
through the Eviction API is told apart (shared.reconcile.evictions)."""

from __future__ import annotations

from pathlib import Path

from shared.reconcile.evictions import pod_evicted
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import manifest, pod_annotations, running, settled, wait_for


def test_evictions_are_retried_for_free_and_a_preemption_is_no_eviction(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("burst")
    go, release = tmp_path / "go", tmp_path / "release"
    # TERM_WAIT: a preempted pod terminates only once `release` exists (within its grace).
    env = {"GO": str(go), "TERM_WAIT": str(release)}
    c.create_job(manifest(name, env=env, backoff_limit_per_index=0, grace=300))
    assert not c.evict_pod("no-such-pod")
    for attempt in range(2):  # more evictions than the index has retries (0)
        [pod] = running(c, name, 1)
        assert c.evict_pod(pod.name)
        wait_for(
            lambda n=attempt + 1: len([p for p in c.list_pods(name) if p.phase == "Failed"]) == n,
            what=f"eviction {attempt + 1} recorded",
        )
    evicted = [p for p in c.list_pods(name) if p.phase == "Failed"]
    assert len(evicted) == 2
    for p in evicted:
        assert (p.reason, p.disruption_reason, p.status_reason) == (
            "DisruptionTarget",
            "TerminationByKubelet",
            "Evicted",
        )
        assert p.exit_code == 137  # no grace at a hard threshold: SIGKILL
        assert pod_evicted(p)
    assert not c.evict_pod(evicted[0].name)  # terminal: nothing left to evict
    status = c.get_job(name)
    assert status is not None and (status.failed, status.failed_indexes) == (0, "")
    # The Job controller keeps the ignored failures apart on the index's next pod
    # (indexed_job_utils.go getNewIndexFailureCounts); its pod-failure back-off still counts
    # them (backoff_utils.go: every failed pod), so the index restarts after a delay.
    [pod] = running(c, name, 1)
    counts = pod_annotations(c, pod.name)
    assert counts["batch.kubernetes.io/job-index-failure-count"] == "0"
    assert counts["batch.kubernetes.io/job-index-ignored-failure-count"] == "2"

    # A preemption (the Eviction API): while the pod terminates, DisruptionTarget with reason
    # EvictionByEvictionAPI and no status.reason; not a node-pressure eviction.
    assert c.preempt_pod(pod.name)
    [preempted] = wait_for(
        lambda: [p for p in c.list_pods(name) if p.name == pod.name and p.disruption_reason],
        what="the preempted pod's condition",
    )
    assert (preempted.phase, preempted.reason) == ("Running", "DisruptionTarget")
    assert (preempted.disruption_reason, preempted.status_reason) == (
        "EvictionByEvictionAPI",
        None,
    )
    assert not pod_evicted(preempted)
    release.touch()
    running(c, name, 1, exclude={pod.name})
    go.touch()
    job = settled(c, name)
    assert (job.condition, job.failed) == ("Complete", 0)
    # The kubelet's evicted pods stay (Failed) until GC; the preempted one was deleted.
    names = {p.name for p in c.list_pods(name)}
    assert {p.name for p in evicted} < names and pod.name not in names
