"""Indexed Job semantics of the local cluster: completion, retries, failure policy, the API."""

from __future__ import annotations

import random
import re
from datetime import UTC
from pathlib import Path

import pytest
from adapters.local.cluster.local_cluster import LocalCluster
from adapters.local.cluster.spec import parse_quantity

from shared.ports.cluster import ClusterError, ManifestRejectedError
from tests.builders.local_jobs import (
    DEFAULT_RULES,
    finished,
    manifest,
    reasons,
    running,
    wait_for,
)


def test_exit_0_completes_every_index_and_the_job(cluster) -> None:
    c, published = cluster
    assert c.create_job(manifest("ok", completions=3, parallelism=2))
    job = finished(c, "ok")
    assert (job.condition, job.reason) == ("Complete", "CompletionsReached")  # as in 1.31+
    assert job.completion_time is not None and job.completion_time.tzinfo is not None
    assert job.start_time is not None and job.created is not None
    assert (job.completed_indexes, job.failed_indexes) == ("0-2", "")
    assert (job.succeeded, job.failed, job.active) == (3, 0, 0)
    pods = c.list_pods("ok")
    assert sorted(p.index for p in pods) == [0, 1, 2]
    for pod in pods:
        assert re.fullmatch(r"ok-\d-[a-z]{5}", pod.name)
        assert (pod.phase, pod.exit_code) == ("Succeeded", 0)
        assert pod.started and pod.finished and pod.created.tzinfo is UTC
        assert pod.labels["batch.kubernetes.io/job-completion-index"] == str(pod.index)
        assert pod.labels["app"] == "test" and pod.cpu_request == pytest.approx(0.1)
    assert c.list_pods("ok", index=1)[0].index == 1
    evs = reasons(c.job_events("ok"))
    assert evs.count("SuccessfulCreate") == 3 and evs[-1] == "Completed"


def test_exit_1_retries_the_index_up_to_backoff_limit_per_index(cluster, tmp_path) -> None:
    c, _ = cluster
    env = {"EXIT_1": "1", "FAIL_ONCE_2": str(tmp_path / "once2")}
    c.create_job(
        manifest(
            "retry",
            completions=3,
            parallelism=3,
            env=env,
            backoff_limit_per_index=2,
            max_failed_indexes=3,
        )
    )
    job = finished(c, "retry")
    assert (job.completed_indexes, job.failed_indexes) == ("0,2", "1")
    attempts = c.list_pods("retry", index=1)
    assert len(attempts) == 3  # backoffLimitPerIndex + 1
    assert all((p.phase, p.exit_code, p.reason) == ("Failed", 1, "Error") for p in attempts)
    index2 = c.list_pods("retry", index=2)
    assert [p.phase for p in index2] == ["Failed", "Succeeded"]  # retried, then fine
    assert len(c.list_pods("retry", index=0)) == 1
    assert job.failed == 4
    # 5 (second half): all indexes resolved, some failed, under the limit -> FailedIndexes
    assert (job.condition, job.reason) == ("Failed", "FailedIndexes")
    assert job.completion_time is None


def test_exit_42_with_fail_index_rule_fails_the_index_without_retries(cluster) -> None:
    c, published = cluster
    c.create_job(
        manifest(
            "fatal",
            completions=4,
            parallelism=4,
            env={"EXIT_3": "42"},
            backoff_limit_per_index=3,
            max_failed_indexes=1,
        )
    )
    job = finished(c, "fatal")
    assert (job.completed_indexes, job.failed_indexes) == ("0-2", "3")
    assert [p.exit_code for p in c.list_pods("fatal", index=3)] == [42]
    assert (job.condition, job.reason, job.failed) == ("Failed", "FailedIndexes", 1)
    failed_event = c.job_events("fatal")[-1]
    assert (failed_event["reason"], failed_event["type"]) == ("FailedIndexes", "Warning")


def test_preemption_restarts_the_index_without_using_its_retry_budget(cluster, tmp_path) -> None:
    c, _ = cluster
    go = tmp_path / "go"
    c.create_job(manifest("spot", env={"GO": str(go)}, backoff_limit_per_index=0))
    (first,) = running(c, "spot", 1)
    assert c.preempt_pod(first.name)
    assert not c.preempt_pod("no-such-pod")
    wait_for(lambda: len(c.list_pods("spot")) == 2, what="a replacement pod")
    go.touch()
    job = finished(c, "spot")
    assert (job.condition, job.completed_indexes, job.failed) == ("Complete", "0", 0)
    old, new = c.list_pods("spot", index=0)
    assert (old.phase, old.reason, old.exit_code) == ("Failed", "DisruptionTarget", 143)
    assert (new.phase, new.exit_code) == ("Succeeded", 0)

    # Without the Ignore rule the preemption counts like any failure.
    rules = [r for r in DEFAULT_RULES if r["action"] != "Ignore"]
    go2 = tmp_path / "go2"
    c.create_job(manifest("spot2", env={"GO": str(go2)}, rules=rules, backoff_limit_per_index=0))
    (pod,) = running(c, "spot2", 1)
    c.preempt_pod(pod.name)
    job = finished(c, "spot2")
    assert (job.failed_indexes, job.failed, job.reason) == ("0", 1, "FailedIndexes")


def test_more_than_max_failed_indexes_fails_the_job_at_once(cluster, tmp_path) -> None:
    c, published = cluster
    go = str(tmp_path / "go")
    never = str(tmp_path / "never")
    env = {"GO_0": go, "GO_1": go, "GO_2": never, "GO_3": never, "EXIT_0": "42", "EXIT_1": "42"}
    c.create_job(
        manifest(
            "toomany",
            completions=4,
            parallelism=4,
            env=env,
            backoff_limit_per_index=0,
            max_failed_indexes=1,
        )
    )
    running(c, "toomany", 4)
    Path(go).touch()
    job = finished(c, "toomany")
    assert (job.condition, job.reason) == ("Failed", "MaxFailedIndexesExceeded")
    assert job.failed_indexes == "0,1" and job.active == 0
    # The Job controller deletes the active pods; once terminated they are gone.
    wait_for(
        lambda: sorted(p.index for p in c.list_pods("toomany")) == [0, 1],
        what="the deleted pods gone",
    )
    evs = c.job_events("toomany")
    assert reasons(evs).count("SuccessfulDelete") == 2
    failed = next(e for e in evs if e["reason"] == "MaxFailedIndexesExceeded")
    assert failed["type"] == "Warning"
    # Once the Job has failed, the pods it deletes count as failed too (as on Kubernetes).
    assert c.get_job("toomany").failed == 4
    wait_for(
        lambda: "MaxFailedIndexesExceeded" in reasons([e["jsonPayload"] for e in published]),
        what="the Failed reason published",
    )


def test_backoff_limit_without_per_index_limit_fails_the_job(cluster) -> None:
    c, _ = cluster
    c.create_job(
        manifest(
            "legacy", env={"EXIT_0": "1"}, backoff_limit_per_index=None, rules=None, backoffLimit=1
        )
    )
    job = finished(c, "legacy")
    assert (job.condition, job.reason, job.failed) == ("Failed", "BackoffLimitExceeded", 2)
    assert len(c.list_pods("legacy")) == 2
    last = c.job_events("legacy")[-1]
    assert (last["reason"], last["type"]) == ("BackoffLimitExceeded", "Warning")


def test_create_is_409_safe_get_list_and_delete(cluster, tmp_path) -> None:
    c, _ = cluster
    go = tmp_path / "go"
    assert c.create_job(manifest("a", env={"GO": str(go)}, labels={"run": "r1", "layer": "2"}))
    assert not c.create_job(manifest("a", completions=5, labels={"run": "other"}))
    assert c.get_job("a").completions == 1 and c.get_job("a").labels["run"] == "r1"
    assert c.create_job(manifest("b", labels={"run": "r1", "layer": "3"}, suspend=True))
    assert c.create_job(manifest("c", labels={"run": "r2"}, suspend=True))
    assert c.get_job("missing") is None
    assert [j.name for j in c.list_jobs({"run": "r1"})] == ["a", "b"]
    assert [j.name for j in c.list_jobs({"run": "r1", "layer": "3"})] == ["b"]
    assert [j.name for j in c.list_jobs({})] == ["a", "b", "c"]
    assert c.get_job("a").annotations == {"a": "b"}
    (pod,) = running(c, "a", 1)
    c.delete_job("a")
    c.delete_job("a")  # missing is fine
    assert c.get_job("a") is None and c.job_events("a") == []
    # As on GKE (background propagation), the deleted Job's pod stays listed while it stops.
    wait_for(lambda: c.list_pods("a") == [], what="the deleted Job's pod gone")
    assert not (c.jobs_dir / "a.json").exists()
    with pytest.raises(ClusterError):
        c.patch_job("a", parallelism=2)
    assert c.create_job(manifest("a"))  # the name is free again
    assert finished(c, "a").condition == "Complete"
    # The Job's pods were deleted with it, their logs too.
    wait_for(lambda: _no_log(c, pod.name), what="the deleted Job's pod log gone")


def test_manifests_the_api_server_would_reject_are_rejected(cluster) -> None:
    c, _ = cluster
    bad = manifest("nonindexed")
    bad["spec"]["completionMode"] = "NonIndexed"
    with pytest.raises(ManifestRejectedError, match="Indexed"):
        c.create_job(bad)
    with pytest.raises(ManifestRejectedError, match="maxFailedIndexes"):
        c.create_job(manifest("mfi", backoff_limit_per_index=None, max_failed_indexes=1, rules=[]))
    with pytest.raises(ManifestRejectedError, match="FailIndex"):
        c.create_job(manifest("fi", backoff_limit_per_index=None))
    with pytest.raises(ManifestRejectedError, match="cpu"):
        c.create_job(manifest("q", cpu="lots"))
    assert c.list_jobs({}) == []
    assert parse_quantity("500m") == 0.5 and parse_quantity("1.5") == 1.5
    assert parse_quantity("512Mi") == 512 * 2**20 and parse_quantity("2Gi") == 2 * 2**30
    assert parse_quantity("1e3") == 1000 and parse_quantity(2) == 2.0


def test_chaos_hooks_kill_counts_and_preempt_does_not(cluster, tmp_path) -> None:
    c, _ = cluster
    rng = random.Random(7)
    go = tmp_path / "go"
    c.create_job(manifest("chaos", completions=2, parallelism=2, env={"GO": str(go)}))
    running(c, "chaos", 2)
    killed = c.kill_random_pod(rng)
    assert killed is not None
    wait_for(lambda: c.get_job("chaos").failed == 1, what="the kill counted")
    victim = next(p for p in c.list_pods("chaos") if p.name == killed)
    assert (victim.phase, victim.exit_code, victim.reason) == ("Failed", 137, "Error")
    running(c, "chaos", 2)
    preempted = c.preempt_random_pod(rng)
    assert preempted is not None
    wait_for(
        lambda: (
            next(p for p in c.list_pods("chaos") if p.name == preempted).reason
            == "DisruptionTarget"
        ),
        what="preempted pod to end",
    )
    running(c, "chaos", 2)
    go.touch()
    job = finished(c, "chaos")
    assert (job.condition, job.failed, job.failed_indexes) == ("Complete", 1, "")
    assert c.kill_random_pod(rng) is None and c.preempt_random_pod(rng) is None


def _no_log(c: LocalCluster, pod_name: str) -> bool:
    try:
        c.pod_log(pod_name)
    except ClusterError:
        return True
    return False
