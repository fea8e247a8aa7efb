"""A Job re-created under the same name on local Kubernetes (the real Job controller and
garbage collector): the pods of the earlier Job, orphaned and still running, are never listed,
counted or shown as the new Job's (`batch.kubernetes.io/controller-uid`,
shared.model.job_generation)."""

from __future__ import annotations

from pathlib import Path

from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import manifest, running, settled, wait_for


def test_a_recreated_job_lists_only_its_own_generations_pods(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name, go = kube_cluster, unique("gen"), tmp_path / "go"
    # Generation 1: two pods that wait for a file, so they outlive their Job.
    assert c.create_job(manifest(name, completions=2, parallelism=2, env={"GO": str(go)}))
    first = c.get_job(name)
    old = {p.uid for p in running(c, name, 2)}
    # Deleted with orphan propagation (as `kubectl delete --cascade=orphan`): the pods stay,
    # with the Job's name label, and keep running.
    c.cluster.batch.delete_namespaced_job(name, c.cluster.namespace, propagation_policy="Orphan")
    wait_for(lambda: c.get_job(name) is None, what=f"job {name} deleted")
    assert c.list_pods(name) == []  # no Job under the name: no generation's pods
    try:
        # Generation 2 under the same name: its pods exit 0 at once.
        assert c.create_job(manifest(name, completions=2, parallelism=2))
        second = settled(c, name)
        assert second.uid and first is not None and second.uid != first.uid
        pods = c.list_pods(name)
        assert len(pods) == 2 and not {p.uid for p in pods} & old
        assert all(p.phase == "Succeeded" for p in pods)
        assert all(p.labels["batch.kubernetes.io/controller-uid"] == second.uid for p in pods)
        assert [p.index for p in c.list_pods(name, index=1)] == [1]
        # The orphans are still there, running under the same name label: only the uid
        # tells them apart (a name selector would have counted 4 pods, 2 of them Running).
        orphans = c.cluster._pods_of(name, f"batch.kubernetes.io/job-name={name}")
        assert {p.uid for p in orphans} >= old
        assert {p.phase for p in orphans if p.uid in old} == {"Running"}
        # the new pods' events (the scheduler's at least), none about the orphans
        seen = {e["involvedObject"]["uid"] for e in c.pod_events(name)}
        assert seen and seen <= {p.uid for p in pods}, (seen, old)
    finally:
        go.touch()
        for pod in c.cluster._pods_of(name, f"batch.kubernetes.io/job-name={name}"):
            if pod.uid in old:
                c.cluster.delete_pod(pod.name)
