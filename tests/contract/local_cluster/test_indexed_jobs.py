"""Indexed Jobs on local Kubernetes, as the controller sees them through the GKE adapter:
completion, retries, the failure policy, preemption, the API's answers (create, list, delete,
validation). Kubernetes' own scenarios are in test_job_conformance.py."""

from __future__ import annotations

import re
from datetime import UTC
from pathlib import Path

import pytest

from shared.ports.cluster import ClusterError, ManifestRejectedError
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import (
    DEFAULT_RULES,
    manifest,
    reasons,
    running,
    settled,
    wait_for,
)


def test_exit_0_completes_every_index_and_the_job(kube_cluster: KubeCluster) -> None:
    c, name = kube_cluster, unique("ok")
    assert c.create_job(manifest(name, completions=3, parallelism=2))
    job = settled(c, name)
    assert (job.condition, job.reason) == ("Complete", "CompletionsReached")  # as in 1.31+
    assert job.completion_time is not None and job.completion_time.tzinfo is not None
    assert job.start_time is not None and job.created is not None
    assert (job.completed_indexes, job.failed_indexes) == ("0-2", "")
    assert (job.succeeded, job.failed, job.active) == (3, 0, 0)
    pods = c.list_pods(name)
    assert sorted(p.index for p in pods) == [0, 1, 2]
    for pod in pods:
        # The Job controller's names: `<job>-<index>-` and the API server's random suffix.
        assert re.fullmatch(rf"{name}-\d-[a-z0-9]{{5}}", pod.name)
        assert (pod.phase, pod.exit_code, pod.reason) == ("Succeeded", 0, "Completed")
        assert pod.started and pod.finished and pod.created and pod.created.tzinfo is UTC
        assert pod.labels["batch.kubernetes.io/job-completion-index"] == str(pod.index)
        assert pod.labels["app"] == "test" and pod.cpu_request == pytest.approx(0.1)
        assert pod.node and pod.job_name == name
    assert [p.index for p in c.list_pods(name, index=1)] == [1]
    evs = reasons(c.job_events(name))
    assert evs.count("SuccessfulCreate") == 3 and "Completed" in evs


def test_retries_up_to_backoff_limit_per_index_and_exit_42_fails_at_once(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("retry")
    env = {"EXIT_1": "1", "FAIL_ONCE_2": str(tmp_path / "once2"), "EXIT_3": "42"}
    c.create_job(
        manifest(
            name,
            completions=4,
            parallelism=4,
            env=env,
            backoff_limit_per_index=2,
            max_failed_indexes=3,
        )
    )
    job = settled(c, name)
    assert (job.completed_indexes, job.failed_indexes) == ("0,2", "1,3")
    attempts = c.list_pods(name, index=1)
    assert len(attempts) == 3  # backoffLimitPerIndex + 1
    assert all((p.phase, p.exit_code, p.reason) == ("Failed", 1, "Error") for p in attempts)
    index2 = c.list_pods(name, index=2)
    assert sorted(p.phase for p in index2) == ["Failed", "Succeeded"]  # retried, then fine
    assert len(c.list_pods(name, index=0)) == 1
    # FailIndex on 42: no retry although two are allowed.
    assert [p.exit_code for p in c.list_pods(name, index=3)] == [42]
    assert job.failed == 5
    # All indexes resolved, some failed, under the limit: FailedIndexes, no completion time.
    assert (job.condition, job.reason) == ("Failed", "FailedIndexes")
    assert job.completion_time is None
    failed_event = next(e for e in c.job_events(name) if e["reason"] == "FailedIndexes")
    assert failed_event["type"] == "Warning"


def test_preemption_costs_no_retry_with_the_ignore_rule_and_one_without(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, free, counted = kube_cluster, unique("spot"), unique("spot-counted")
    go = tmp_path / "go"
    without_ignore = [r for r in DEFAULT_RULES if r["action"] != "Ignore"]
    c.create_job(manifest(free, env={"GO": str(go)}, backoff_limit_per_index=0))
    c.create_job(
        manifest(counted, env={"GO": str(go)}, rules=without_ignore, backoff_limit_per_index=0)
    )
    (first,) = running(c, free, 1)
    (other,) = running(c, counted, 1)
    assert c.preempt_pod(first.name) and c.preempt_pod(other.name)
    assert not c.preempt_pod("no-such-pod")
    # The Eviction API deletes the pod: once it has terminated it is gone, and the Ignore rule
    # gives its index a new pod without spending the index's retry (there is none).
    (replacement,) = running(c, free, 1, exclude={first.name})
    wait_for(lambda: [p.name for p in c.list_pods(free)] == [replacement.name], what="first gone")
    job = settled(c, counted)  # without the rule the preemption is the index's one failure
    assert (job.failed_indexes, job.failed, job.reason) == ("0", 1, "FailedIndexes")
    go.touch()
    job = settled(c, free)
    assert (job.condition, job.completed_indexes, job.failed) == ("Complete", "0", 0)
    [pod] = c.list_pods(free)
    assert (pod.name, pod.phase, pod.exit_code) == (replacement.name, "Succeeded", 0)


def test_more_than_max_failed_indexes_fails_the_job_at_once(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    c, name = kube_cluster, unique("toomany")
    go, never = str(tmp_path / "go"), str(tmp_path / "never")
    env = {"GO_0": go, "GO_1": go, "GO_2": never, "GO_3": never, "EXIT_0": "42", "EXIT_1": "42"}
    c.create_job(
        manifest(
            name,
            completions=4,
            parallelism=4,
            env=env,
            backoff_limit_per_index=0,
            max_failed_indexes=1,
        )
    )
    running(c, name, 4)
    Path(go).touch()
    job = settled(c, name)
    assert (job.condition, job.reason) == ("Failed", "MaxFailedIndexesExceeded")
    assert job.failed_indexes == "0,1" and job.active == 0
    # The Job controller deleted the active pods; terminated, they are gone.
    assert sorted(p.index for p in c.list_pods(name)) == [0, 1]
    evs = c.job_events(name)
    assert reasons(evs).count("SuccessfulDelete") == 2
    failed = next(e for e in evs if e["reason"] == "MaxFailedIndexesExceeded")
    assert failed["type"] == "Warning"
    # Once the Job has failed, the pods it deletes count as failed too.
    assert job.failed == 4
    wait_for(
        lambda: (
            "MaxFailedIndexesExceeded"
            in [e["jsonPayload"]["reason"] for e in c.job_log_entries(name)]
        ),
        what="the Failed reason published",
    )


def test_create_is_409_safe_get_list_and_delete(kube_cluster: KubeCluster, tmp_path: Path) -> None:
    c, base, run = kube_cluster, unique("crud"), unique("run")
    a, b, other = f"{base}-a", f"{base}-b", f"{base}-c"
    go = tmp_path / "go"
    assert c.create_job(manifest(a, env={"GO": str(go)}, labels={"run": run, "layer": "2"}))
    assert not c.create_job(manifest(a, completions=5, labels={"run": "other"}))
    job = c.get_job(a)
    assert job is not None and job.completions == 1 and job.labels["run"] == run
    assert c.create_job(manifest(b, labels={"run": run, "layer": "3"}, suspend=True))
    assert c.create_job(manifest(other, labels={"run": f"{run}-x"}, suspend=True))
    assert c.get_job(unique("missing")) is None
    assert [j.name for j in c.list_jobs({"run": run})] == [a, b]
    assert [j.name for j in c.list_jobs({"run": run, "layer": "3"})] == [b]
    assert job.annotations == {"a": "b"}
    (pod,) = running(c, a, 1)
    c.delete_job(a)
    c.delete_job(a)  # missing is fine
    assert c.get_job(a) is None
    # Events are not owned by their Job: they stay until their TTL (the API server's
    # --event-ttl, an hour), so a Job created again under the name lists the old ones too.
    assert "SuccessfulCreate" in reasons(c.job_events(a))
    # Background propagation: the garbage collector deletes the pod after the Job.
    wait_for(lambda: c.list_pods(a) == [], what="the deleted Job's pod gone")
    with pytest.raises(ClusterError):
        c.patch_job(a, parallelism=2)
    assert c.create_job(manifest(a))  # the name is free again
    assert settled(c, a).condition == "Complete"
    # The Job's pods were deleted with it, their logs too.
    with pytest.raises(ClusterError):
        c.pod_log(pod.name)


def test_manifests_the_api_server_would_reject_are_rejected(kube_cluster: KubeCluster) -> None:
    c = kube_cluster
    # Kubernetes runs NonIndexed Jobs too (the pipeline renders Indexed ones only).
    # (without what only Indexed Jobs may have: backoffLimitPerIndex, a FailIndex rule).
    plain = manifest(unique("nonindexed"), backoff_limit_per_index=None, rules=DEFAULT_RULES[:1])
    plain["spec"]["completionMode"] = "NonIndexed"
    c.validate_job(plain)
    with pytest.raises(ManifestRejectedError, match="requires indexed completion mode"):
        c.validate_job({**plain, "spec": {**plain["spec"], "backoffLimitPerIndex": 1}})
    names = [unique(n) for n in ("mfi", "fi", "q")]
    with pytest.raises(ManifestRejectedError, match="maxFailedIndexes"):
        c.create_job(
            manifest(names[0], backoff_limit_per_index=None, max_failed_indexes=1, rules=[])
        )
    with pytest.raises(ManifestRejectedError, match="FailIndex"):
        c.create_job(manifest(names[1], backoff_limit_per_index=None))
    with pytest.raises(ManifestRejectedError, match="quantities"):
        c.create_job(manifest(names[2], cpu="lots"))
    assert all(c.get_job(n) is None for n in names)
