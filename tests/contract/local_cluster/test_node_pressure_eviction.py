"""The local cluster evicts a pod for node pressure as the kubelet does: the pod Failed with
status.reason `Evicted` and the kubelet's message, the DisruptionTarget condition with reason
TerminationByKubelet, an `Evicted` event; the Job's DisruptionTarget rule ignores it like a
preemption (the index is retried, no retry spent), however often it happens."""

from __future__ import annotations

from shared.reconcile.evictions import pod_evicted
from tests.builders.local_jobs import finished, manifest, running, wait_for


def test_evicted_pods_are_kubelet_evictions_and_their_index_is_retried_for_free(
    cluster, tmp_path
) -> None:
    c, _ = cluster
    go = tmp_path / "go"
    c.create_job(manifest("burst", env={"GO": str(go)}, backoff_limit_per_index=0))
    for attempt in range(3):  # more evictions than the index has retries (0)
        [pod] = running(c, "burst", 1)
        assert c.evict_pod(pod.name)
        wait_for(
            lambda n=attempt + 1: (
                len([p for p in c.list_pods("burst") if p.phase == "Failed"]) == n
            ),
            what=f"eviction {attempt + 1} recorded",
        )
    evicted = [p for p in c.list_pods("burst") if p.phase == "Failed"]
    assert len(evicted) == 3
    for p in evicted:
        assert (p.reason, p.disruption_reason, p.status_reason) == (
            "DisruptionTarget",
            "TerminationByKubelet",
            "Evicted",
        )
        assert p.exit_code == 137  # no grace at a hard threshold: SIGKILL
        assert pod_evicted(p)
    status = c.get_job("burst")
    assert (status.failed, status.failed_indexes) == (0, "")  # ignored: no retry spent
    events = [e for e in c.job_events("burst") if e["reason"] == "Evicted"]
    assert len(events) == 3
    assert events[0]["type"] == "Warning" and events[0]["source"]["component"] == "kubelet"
    assert events[0]["message"].startswith("The node was low on resource: memory. ")
    go.touch()
    assert finished(c, "burst").condition == "Complete"


def test_only_a_running_pod_can_be_evicted_and_a_preemption_is_no_eviction(
    cluster, tmp_path
) -> None:
    c, _ = cluster
    c.create_job(manifest("spot", env={"GO": str(tmp_path / "never")}))
    assert not c.evict_pod("no-such-pod")
    [pod] = running(c, "spot", 1)
    assert c.preempt_pod(pod.name)
    wait_for(lambda: [p for p in c.list_pods("spot") if p.phase == "Failed"], what="the preemption")
    [preempted] = [p for p in c.list_pods("spot") if p.phase == "Failed"]
    assert preempted.reason == "DisruptionTarget"
    assert not pod_evicted(preempted)
    assert not c.evict_pod(preempted.name)  # terminal: nothing left to evict
