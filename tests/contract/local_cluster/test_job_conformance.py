"""The local cluster held to the Kubernetes Job controller: scenarios from Kubernetes' own tests
and documentation, each naming its source (kubernetes/kubernetes paths, or the Job concept and
API reference pages). docs/local-cluster.md lists them with what each checks.

The status the local cluster reports must be the one the Job controller writes: interval
strings, counts, conditions and reasons; and whatever Kubernetes writes, the controller's
parsing (shared.model.intervals, adapters.gke.wire, shared.control.job_events) must read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from adapters.local.cluster.local_cluster import LocalCluster

from adapters.gke.wire import job_status
from adapters.local.log_export import make_log_entry
from shared.control.job_events import parse_log_entry
from shared.model import intervals
from shared.ports.cluster import JobStatus
from tests.builders.k8s_objects import job as k8s_job
from tests.builders.local_jobs import finished, manifest, reasons, running, wait_for

IGNORE_DISRUPTION = {
    "action": "Ignore",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}


def settled(c: LocalCluster, name: str) -> JobStatus:
    """The Job once it has finished and none of its pods is still Pending or Running: the
    point at which Kubernetes (1.31+) turns FailureTarget into Failed, counts final."""
    finished(c, name)
    wait_for(
        lambda: not [p for p in c.list_pods(name) if p.phase in ("Pending", "Running")],
        what=f"every pod of {name} terminated",
    )
    job = c.get_job(name)
    assert job is not None
    return job


# -- 1. the interval strings -------------------------------------------------------------------

# Source: pkg/controller/job/indexed_job_utils.go, orderedIntervals.String (a range only when
# Last > First+1); the API reference of JobStatus.completedIndexes ("Three or more consecutive
# numbers are compressed ... 1, 3, 4, 5 and 7 ... "1,3-5,7""); the expected intervals of
# pkg/controller/job/indexed_job_utils_test.go TestCalculateSucceededIndexes.
FORMATS = [
    ([], ""),
    ([1], "1"),
    ([0, 1], "0,1"),  # e2e "should record the failure-count ...": FailedIndexes "0,1"
    ([0, 1, 2], "0-2"),
    ([1, 3, 4, 5, 7], "1,3-5,7"),  # the API reference's example
    ([5, 10], "5,10"),  # TestCalculateSucceededIndexes "two separate"
    ([2, 3, 5, 6, 7], "2,3,5-7"),  # "two intervals": {2,3},{5,7}
    ([0, 2, 3, 4, 5], "0,2-5"),  # "one index and one interval"
    ([0, 2, 4, 5, 7, 8, 10, 11, 12], "0,2,4,5,7,8,10-12"),  # "prev and new separate"
    ([2, 3, 4, 6, 7, 8], "2-4,6-8"),  # "prev between new"
]


@pytest.mark.parametrize(("indexes", "text"), FORMATS, ids=[t or "empty" for _, t in FORMATS])
def test_1_interval_strings_compress_only_three_or_more(indexes: list[int], text: str) -> None:
    assert intervals.format(indexes) == text


# -- 2. every form Kubernetes writes is read ------------------------------------------------------

# Source: pkg/controller/job/indexed_job_utils_test.go TestCalculateSucceededIndexes, the
# `prevSucceeded` strings (what an earlier sync wrote into .status.completedIndexes) and their
# `wantStatusIntervals`; succeededIndexesFromString reads "N" and "N-M" parts alike.
PARSED = [
    ("3-5", [3, 4, 5]),
    ("0,4,5,10-12", [0, 4, 5, 10, 11, 12]),
    ("3,4,6", [3, 4, 6]),
    ("2,7,8", [2, 7, 8]),
    ("0,1", [0, 1]),
    ("0-1", [0, 1]),  # not Kubernetes' form, but records written before it stay readable
]


@pytest.mark.parametrize(("text", "indexes"), PARSED, ids=[t for t, _ in PARSED])
def test_2_every_interval_form_kubernetes_writes_is_read(text: str, indexes: list[int]) -> None:
    assert intervals.parse(text) == indexes
    assert intervals.count(text) == len(indexes)
    assert [i for a, b in intervals.ranges(text) for i in range(a, b + 1)] == indexes
    raw = k8s_job(completions=13, completedIndexes=text, failedIndexes=text)
    status = job_status(raw)
    assert (status.completed_indexes, status.failed_indexes) == (text, text)


# -- 3. conditions and reasons as the Job controller sets them --------------------------------

# Source: the Job concept page, "Termination of Job pods" and "Job termination and cleanup"
# (FailureTarget / SuccessCriteriaMet first, Failed / Complete once the pods are gone) with the
# reasons BackoffLimitExceeded, DeadlineExceeded, FailedIndexes, MaxFailedIndexesExceeded,
# PodFailurePolicy, SuccessPolicy and CompletionsReached; test/e2e/apps/job.go waits for
# FailureTarget with MaxFailedIndexesExceeded, and for SuccessCriteriaMet with SuccessPolicy.
CONDITIONS = [
    ([("FailureTarget", r)], "Failed", r)
    for r in (
        "BackoffLimitExceeded",
        "DeadlineExceeded",
        "FailedIndexes",
        "MaxFailedIndexesExceeded",
        "PodFailurePolicy",
    )
] + [
    (
        [("FailureTarget", "DeadlineExceeded"), ("Failed", "DeadlineExceeded")],
        "Failed",
        "DeadlineExceeded",
    ),
    ([("SuccessCriteriaMet", "SuccessPolicy")], "Complete", "SuccessPolicy"),
    (
        [("SuccessCriteriaMet", "SuccessPolicy"), ("Complete", "SuccessPolicy")],
        "Complete",
        "SuccessPolicy",
    ),
    ([("SuccessCriteriaMet", "CompletionsReached")], "Complete", "CompletionsReached"),
]


@pytest.mark.parametrize(("conditions", "condition", "reason"), CONDITIONS)
def test_3_terminal_conditions_and_reasons_are_read(
    conditions: list[tuple[str, str]], condition: str, reason: str
) -> None:
    raw = k8s_job(conditions=[{"type": t, "status": "True", "reason": r} for t, r in conditions])
    status = job_status(raw)
    assert (status.condition, status.reason, status.finished) == (condition, reason, True)
    # The Job controller's event about it reaches the controller through the log sink.
    entry = make_log_entry(
        project="p",
        cluster="c",
        location="l",
        namespace="ns",
        job_name="j",
        job_uid="u",
        reason=reason,
        message="Job was active longer than specified deadline",
        event_type="Warning" if condition == "Failed" else "Normal",
    )
    assert parse_log_entry(entry).reason == reason
    # Cloud Logging stamps entries to the nanosecond.
    entry["timestamp"] = "2026-03-02T14:05:11.123456789Z"
    assert parse_log_entry(entry).timestamp.microsecond == 123456


# -- 4-13. the local cluster running Jobs ---------------------------------------------------------


def test_4_indexed_job_completes_every_index(cluster) -> None:
    # Source: test/e2e/apps/job.go "should create pods for an Indexed job with completion
    # indexes and specified hostname" (parallelism 2, completions 4: Complete with
    # CompletionsReached, each pod with its index).
    c, _ = cluster
    c.create_job(manifest("indexed", completions=4, parallelism=2, rules=None))
    job = settled(c, "indexed")
    assert (job.condition, job.reason) == ("Complete", "CompletionsReached")
    assert (job.completed_indexes, job.succeeded, job.failed, job.active) == ("0-3", 4, 0, 0)
    pods = c.list_pods("indexed")
    assert sorted(p.index for p in pods) == [0, 1, 2, 3]
    assert all(p.labels["batch.kubernetes.io/job-completion-index"] == str(p.index) for p in pods)
    assert reasons(c.job_events("indexed"))[-1] == "Completed"


def test_5_backoff_limit_per_index_executes_every_index(cluster) -> None:
    # Source: test/e2e/apps/job.go "should execute all indexes despite some failing when using
    # backoffLimitPerIndex": odd indexes fail, backoffLimitPerIndex 1 -> FailedIndexes "1,3",
    # CompletedIndexes "0,2", Failed 4, Succeeded 2.
    c, _ = cluster
    env = {"EXIT_1": "1", "EXIT_3": "1"}
    c.create_job(
        manifest("oddfail", completions=4, parallelism=2, env=env, rules=None)  # per index: 1
    )
    job = settled(c, "oddfail")
    assert (job.condition, job.reason) == ("Failed", "FailedIndexes")
    assert (job.failed_indexes, job.completed_indexes) == ("1,3", "0,2")
    assert (job.failed, job.succeeded) == (4, 2)


def test_6_two_failed_indexes_are_written_apart(cluster) -> None:
    # Source: test/e2e/apps/job.go "should record the failure-count in the Pod annotation when
    # using backoffLimitPerIndex": parallelism 2, completions 2, every pod fails ->
    # FailedIndexes "0,1", CompletedIndexes "", Failed 4, Succeeded 0.
    c, _ = cluster
    env = {"EXIT_0": "1", "EXIT_1": "1"}
    c.create_job(manifest("allfail", completions=2, parallelism=2, env=env, rules=None))
    job = settled(c, "allfail")
    assert (job.condition, job.reason) == ("Failed", "FailedIndexes")
    assert (job.failed_indexes, job.completed_indexes) == ("0,1", "")
    assert (job.failed, job.succeeded) == (4, 0)


def test_7_max_failed_indexes_ends_the_job_early(cluster) -> None:
    # Source: test/e2e/apps/job.go "should terminate job execution when the number of failed
    # indexes exceeds maxFailedIndexes": parallelism 1, completions 4, backoffLimitPerIndex 0,
    # maxFailedIndexes 0 -> FailedIndexes "0", Failed 1 (the later indexes never run).
    c, _ = cluster
    env = {f"EXIT_{i}": "1" for i in range(4)}
    c.create_job(
        manifest(
            "maxfail",
            completions=4,
            parallelism=1,
            env=env,
            rules=None,
            backoff_limit_per_index=0,
            max_failed_indexes=0,
        )
    )
    job = settled(c, "maxfail")
    assert (job.condition, job.reason) == ("Failed", "MaxFailedIndexesExceeded")
    assert (job.failed_indexes, job.failed) == ("0", 1)
    assert [p.index for p in c.list_pods("maxfail")] == [0]


def test_8_fail_index_rule_fails_the_index_without_a_retry(cluster) -> None:
    # Source: test/e2e/apps/job.go "should mark indexes as failed when the FailIndex action is
    # matched in podFailurePolicy": parallelism 2, completions 2, backoffLimitPerIndex 1, exit 1
    # matches FailIndex on odd indexes -> FailedIndexes "1", CompletedIndexes "0", Failed 1.
    c, _ = cluster
    rules = [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]
    c.create_job(
        manifest("failindex", completions=2, parallelism=2, env={"EXIT_1": "1"}, rules=rules)
    )
    job = settled(c, "failindex")
    assert (job.condition, job.reason) == ("Failed", "FailedIndexes")
    assert (job.failed_indexes, job.completed_indexes) == ("1", "0")
    assert (job.failed, job.succeeded) == (1, 1)


def _failing_with_others_running(
    c: LocalCluster, tmp_path: Path, name: str, **spec: Any
) -> JobStatus:
    """Index 0 fails (exit `EXIT_0`) once indexes 1 and 2 are running and blocked."""
    go, never = str(tmp_path / f"{name}-go"), str(tmp_path / f"{name}-never")
    env = {"GO_0": go, "GO_1": never, "GO_2": never, **spec.pop("env")}
    c.create_job(manifest(name, completions=3, parallelism=3, env=env, **spec))
    running(c, name, 3)
    Path(go).touch()
    return settled(c, name)


def test_9_fail_job_rule_counts_the_pods_it_terminates(cluster, tmp_path) -> None:
    # Source: pkg/controller/job/job_controller.go trackJobStatusAndRemoveFinalizers ("When the
    # job is considered finished, every non-terminated pod is considered failed"), the FailJob
    # message of pkg/controller/job/pod_failure_policy.go matchPodFailurePolicy, and
    # test/e2e/apps/job.go "should allow to use the pod failure policy on exit code to fail the
    # job early" (parallelism 2, completions 4: the Job fails with PodFailurePolicy).
    c, _ = cluster
    rules = [
        IGNORE_DISRUPTION,
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [5]}},
    ]
    job = _failing_with_others_running(
        c, tmp_path, "failjob", env={"EXIT_0": "5"}, rules=rules, backoff_limit_per_index=None
    )
    assert (job.condition, job.reason) == ("Failed", "PodFailurePolicy")
    assert (job.failed, job.active, job.succeeded) == (3, 0, 0)
    event = next(e for e in c.job_events("failjob") if e["reason"] == "PodFailurePolicy")
    assert event["type"] == "Warning"
    assert event["message"].startswith("Container worker for pod default/failjob-0-")
    assert event["message"].endswith("failed with exit code 5 matching FailJob rule at index 1")


def test_10_max_failed_indexes_counts_the_pods_it_terminates(cluster, tmp_path) -> None:
    # Source: the Job concept page, "Backoff limit per index" (when maxFailedIndexes is exceeded
    # the Job controller terminates the remaining running Pods and the Job fails with
    # MaxFailedIndexesExceeded) and job_controller.go trackJobStatusAndRemoveFinalizers (those
    # pods count as failed).
    c, _ = cluster
    job = _failing_with_others_running(
        c,
        tmp_path,
        "maxidx",
        env={"EXIT_0": "1"},
        backoff_limit_per_index=0,
        max_failed_indexes=0,
    )
    assert (job.condition, job.reason) == ("Failed", "MaxFailedIndexesExceeded")
    assert (job.failed_indexes, job.failed, job.active) == ("0", 3, 0)


def test_11_backoff_limit_counts_the_pods_it_terminates(cluster, tmp_path) -> None:
    # Source: the Job concept page, "Pod backoff failure policy" (the Job fails with
    # BackoffLimitExceeded once more pods failed than backoffLimit; its running pods are
    # terminated) and job_controller.go trackJobStatusAndRemoveFinalizers (they count as failed).
    c, _ = cluster
    job = _failing_with_others_running(
        c,
        tmp_path,
        "backoff",
        env={"EXIT_0": "1"},
        rules=[IGNORE_DISRUPTION],
        backoff_limit_per_index=None,
        backoffLimit=0,
    )
    assert (job.condition, job.reason) == ("Failed", "BackoffLimitExceeded")
    assert (job.failed, job.active) == (3, 0)
    last = c.job_events("backoff")
    assert next(e for e in last if e["reason"] == "BackoffLimitExceeded")["message"] == (
        "Job has reached the specified backoff limit"
    )


def test_12_ignored_disruptions_do_not_count(cluster, tmp_path) -> None:
    # Source: test/e2e/apps/job.go "should allow to use a pod failure policy to ignore failure
    # matching on DisruptionTarget condition": 3 pods, backoffLimit 2, every pod disrupted once
    # -> the Job still completes with CompletionsReached.
    c, _ = cluster
    go = tmp_path / "go"
    c.create_job(
        manifest(
            "disrupted",
            completions=3,
            parallelism=3,
            env={"GO": str(go)},
            rules=[IGNORE_DISRUPTION],
            backoff_limit_per_index=None,
            backoffLimit=2,
        )
    )
    first = running(c, "disrupted", 3)
    assert all(c.preempt_pod(p.name) for p in first)
    replacements = running(c, "disrupted", 3)  # ready counts active pods only: the new ones
    assert not {p.name for p in first} & {p.name for p in replacements}
    go.touch()
    job = settled(c, "disrupted")
    assert (job.condition, job.reason) == ("Complete", "CompletionsReached")
    assert (job.failed, job.succeeded, job.completed_indexes) == (0, 3, "0-2")


def test_13_suspend_deletes_pods_and_resume_recreates_them(cluster, tmp_path) -> None:
    # Source: test/integration/job/job_test.go TestSuspendJob (active 2 -> 0 with the Suspended
    # event, then 2 again with Resumed) and test/e2e/apps/job.go "should delete pods when
    # suspended" (the pods go, a Suspended condition stays).
    c, _ = cluster
    go = tmp_path / "go"
    c.create_job(manifest("susp", completions=4, parallelism=2, env={"GO": str(go)}))
    running(c, "susp", 2)
    c.patch_job("susp", suspend=True)
    wait_for(lambda: c.list_pods("susp") == [], what="the suspended Job's pods gone")
    job = c.get_job("susp")
    assert job is not None
    assert (job.active, job.condition, job.reason) == (0, "Suspended", "JobSuspended")
    c.patch_job("susp", suspend=False)
    running(c, "susp", 2)
    go.touch()
    job = settled(c, "susp")
    assert (job.condition, job.completed_indexes) == ("Complete", "0-3")
    evs = reasons(c.job_events("susp"))
    assert evs.index("Suspended") < evs.index("Resumed")
