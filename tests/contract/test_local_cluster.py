"""Semantics of the local cluster: Kubernetes Indexed Jobs with subprocess pods.

Each test names the batch/v1 behaviour it pins down. Pods are tiny `python -c` programs
driven by env: `GO_<i>`/`GO` make index i wait for a file, `EXIT_<i>` is its exit code,
`FAIL_ONCE_<i>` makes its first attempt exit 1. Waits poll with generous timeouts.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.local.cluster.events import EventSettings
from shared.adapters.local.cluster.local_cluster import LocalCluster
from shared.adapters.local.cluster.spec import parse_quantity
from shared.adapters.local.cluster.view import LocalClusterView
from shared.cluster import ClusterError, JobStatus, ManifestRejectedError, PodInfo

TIMEOUT = 30.0

WORKER = """
import os, sys, time
i = os.environ["JOB_COMPLETION_INDEX"]
print(f"index {i} running", flush=True)
go = os.environ.get(f"GO_{i}", os.environ.get("GO", ""))
while go and not os.path.exists(go):
    time.sleep(0.02)
once = os.environ.get(f"FAIL_ONCE_{i}")
if once and not os.path.exists(once):
    open(once, "w").close()
    sys.exit(1)
sys.exit(int(os.environ.get(f"EXIT_{i}", "0")))
"""

DEFAULT_RULES = [
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    {
        "action": "FailIndex",
        "onExitCodes": {"containerName": "worker", "operator": "In", "values": [42]},
    },
]


def manifest(
    name: str,
    *,
    completions: int = 1,
    parallelism: int = 1,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    backoff_limit_per_index: int | None = 1,
    max_failed_indexes: int | None = None,
    rules: list[dict[str, Any]] | None = DEFAULT_RULES,
    suspend: bool = False,
    cpu: str = "100m",
    memory: str = "64Mi",
    grace: int = 5,
    labels: dict[str, str] | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    """A minimal valid Indexed Job manifest, as the controller would send it."""
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": completions,
        "parallelism": parallelism,
        "suspend": suspend,
        "template": {
            "metadata": {"labels": {"app": "test"}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": grace,
                "containers": [
                    {
                        "name": "worker",
                        "image": "unused",
                        "command": command or ["python", "-c", WORKER],
                        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }
                ],
            },
        },
        **spec_extra,
    }
    if backoff_limit_per_index is not None:
        spec["backoffLimitPerIndex"] = backoff_limit_per_index
    if max_failed_indexes is not None:
        spec["maxFailedIndexes"] = max_failed_indexes
    if rules is not None:
        spec["podFailurePolicy"] = {"rules": rules}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {"run": "r1"}, "annotations": {"a": "b"}},
        "spec": spec,
    }


def wait_for(predicate: Callable[[], Any], timeout: float = TIMEOUT, what: str = "") -> Any:
    """Poll until predicate() is truthy; return its value or fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.02)


def finished(cluster: LocalCluster, name: str) -> JobStatus:
    return wait_for(
        lambda: (j := cluster.get_job(name)) is not None and j.finished and j,
        what=f"job {name} to finish",
    )


def running(cluster: LocalCluster, name: str, n: int) -> list[PodInfo]:
    """Wait until exactly n pods of the Job are Running and active (log line printed)."""

    def check() -> list[PodInfo] | None:
        pods = [p for p in cluster.list_pods(name) if p.phase == "Running"]
        if len(pods) != n or cluster.get_job(name).ready != n:  # type: ignore[union-attr]
            return None
        logs_ok = all("running" in cluster.pod_log(p.name) for p in pods)
        return pods if logs_ok else None

    return wait_for(check, what=f"{n} running pods of {name}")


def reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., tuple[LocalCluster, list]]]:
    made: list[LocalCluster] = []

    def make(**kwargs: Any) -> tuple[LocalCluster, list[dict[str, Any]]]:
        published: list[dict[str, Any]] = []
        kwargs.setdefault("on_event", published.append)
        # GKE's recorder model, but no sink delay: these tests read what was published.
        kwargs.setdefault("events", EventSettings(sink_delay_s=(0.0, 0.0)))
        cluster = LocalCluster(tmp_path / f"cluster{len(made)}", **kwargs).start()
        made.append(cluster)
        return cluster, published

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture
def cluster(make_cluster) -> tuple[LocalCluster, list[dict[str, Any]]]:
    return make_cluster()


# 1 ------------------------------------------------------------------------------------------
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


# 2 ------------------------------------------------------------------------------------------
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


# 3 ------------------------------------------------------------------------------------------
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


# 4 ------------------------------------------------------------------------------------------
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


# 5 ------------------------------------------------------------------------------------------
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
    assert job.failed_indexes == "0-1" and job.active == 0
    wait_for(
        lambda: all(p.phase == "Failed" for p in c.list_pods("toomany")),
        what="active pods terminated",
    )
    for index in (2, 3):
        (pod,) = c.list_pods("toomany", index=index)
        assert (pod.reason, pod.exit_code) == ("Deleted", 143)
    evs = c.job_events("toomany")
    assert reasons(evs).count("SuccessfulDelete") == 2
    failed = next(e for e in evs if e["reason"] == "MaxFailedIndexesExceeded")
    assert failed["type"] == "Warning"
    assert c.get_job("toomany").failed == 2  # the deleted pods are not failures
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


# 6 ------------------------------------------------------------------------------------------
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
    wait_for(
        lambda: sum(p.phase == "Failed" for p in c.list_pods("scale")) == 2,
        what="two pods deleted",
    )
    deleted = [p for p in c.list_pods("scale") if p.phase == "Failed"]
    assert sorted(p.index for p in deleted) == [1, 2] and {p.reason for p in deleted} == {"Deleted"}
    job = c.get_job("scale")
    assert (job.active, job.failed, job.failed_indexes) == (1, 0, "")
    assert reasons(c.job_events("scale")).count("SuccessfulDelete") == 2
    go.touch()
    job = finished(c, "scale")
    assert (job.condition, job.completed_indexes, job.failed) == ("Complete", "0-3", 0)
    assert [len(c.list_pods("scale", index=i)) for i in range(4)] == [1, 2, 2, 1]


# 7 ------------------------------------------------------------------------------------------
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
    wait_for(lambda: all(p.phase != "Running" for p in c.list_pods("pause")), what="pods gone")
    pods_before = len(c.list_pods("pause"))
    c.wait_ticks(5)
    assert len(c.list_pods("pause")) == pods_before  # a suspended Job starts no pods
    job = c.get_job("pause")
    assert (job.active, job.failed, job.completed_indexes) == (0, 0, "0")
    assert {p.reason for p in c.list_pods("pause") if p.index != 0} == {"Deleted"}
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


# 8 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cpu", "memory", "short"), [("600m", "100Mi", "cpu"), ("100m", "768Mi", "memory")]
)
def test_pods_that_do_not_fit_stay_pending_until_capacity_frees(
    make_cluster, tmp_path, cpu, memory, short
) -> None:
    c, published = make_cluster(capacity_cpu=1.0, capacity_memory_gib=1.0)
    go = tmp_path / "go"
    c.create_job(
        manifest(
            "tight", completions=2, parallelism=2, env={"GO_0": str(go)}, cpu=cpu, memory=memory
        )
    )
    first = running(c, "tight", 1)[0]
    assert first.index == 0
    pending = wait_for(
        lambda: [p for p in c.list_pods("tight") if p.reason == "FailedScheduling"],
        what="a FailedScheduling pod",
    )
    assert pending[0].phase == "Pending" and pending[0].index == 1
    assert c.get_job("tight").active == 2 and c.get_job("tight").ready == 1
    sched = [e for e in c.job_events("tight") if e["reason"] == "FailedScheduling"]
    assert len(sched) == 1 and sched[0]["involvedObject"]["kind"] == "Pod"
    assert sched[0]["involvedObject"]["name"] == pending[0].name
    assert f"Insufficient {short}" in sched[0]["message"]
    assert c.pod_log(pending[0].name) == ""
    go.touch()
    job = finished(c, "tight")
    assert job.condition == "Complete"
    assert "FailedScheduling" not in reasons([e["jsonPayload"] for e in published])


# 9 ------------------------------------------------------------------------------------------
def test_pod_logs_are_kept_and_readable_by_pod_name(cluster) -> None:
    c, _ = cluster
    code = "import sys\nfor n in range(5): print(f'line {n} of index', sys.argv[1])"
    c.create_job(
        manifest(
            "logs",
            completions=2,
            parallelism=2,
            command=["python", "-c", code, "$(JOB_COMPLETION_INDEX)"],
        )
    )
    finished(c, "logs")
    for pod in c.list_pods("logs"):
        assert c.pod_log(pod.name, tail_lines=2) == (
            f"line 3 of index {pod.index}\nline 4 of index {pod.index}\n"
        )
        assert c.pod_log(pod.name).count("\n") == 5
        assert c.pod_log(pod.name, tail_lines=0) == ""
    with pytest.raises(ClusterError):
        c.pod_log("logs-9-zzzzz")


# 10 -----------------------------------------------------------------------------------------
def test_job_events_are_published_as_gke_log_entries_outside_the_lock(make_cluster) -> None:
    seen: list[dict[str, Any]] = []
    statuses: list[JobStatus | None] = []
    holder: dict[str, LocalCluster] = {}

    def on_event(entry: dict[str, Any]) -> None:
        # Calling back into the cluster would deadlock if the lock were held here.
        statuses.append(holder["c"].get_job("events"))
        seen.append(entry)
        if len(seen) == 1:
            raise RuntimeError("a broken subscriber must not break the cluster")

    c, _ = make_cluster(
        on_event=on_event,
        project="proj",
        cluster_name="cl",
        location="loc",
        events=EventSettings.instant(),
    )
    holder["c"] = c
    c.create_job(manifest("events", completions=2, parallelism=2))
    finished(c, "events")
    wait_for(lambda: "Completed" in [e["jsonPayload"]["reason"] for e in seen], what="Completed")
    assert len(statuses) == len(seen) >= 3
    for entry in seen:
        assert entry["logName"].endswith("/logs/events")
        assert entry["logName"] == "projects/proj/logs/events"
        assert entry["resource"]["type"] == "k8s_cluster"
        assert entry["resource"]["labels"]["cluster_name"] == "cl"
        payload = entry["jsonPayload"]
        assert payload["kind"] == "Event"
        assert payload["involvedObject"]["kind"] == "Job"
        assert payload["involvedObject"]["name"] == "events"
    assert len({e["insertId"] for e in seen}) == len(seen)
    names = sorted(p.name for p in c.list_pods("events"))
    payloads = [e["jsonPayload"] for e in seen]
    creates = sorted(p["message"] for p in payloads if p["reason"] == "SuccessfulCreate")
    assert creates == [f"Created pod: {n}" for n in names]
    kept = c.job_events("events")
    assert [e["metadata"]["name"] for e in kept] == [
        e["jsonPayload"]["metadata"]["name"] for e in seen
    ]


# 11 -----------------------------------------------------------------------------------------
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
    assert c.get_job("a") is None and c.list_pods("a") == [] and c.job_events("a") == []
    assert not (c.jobs_dir / "a.json").exists()
    with pytest.raises(ClusterError):
        c.patch_job("a", parallelism=2)
    assert c.create_job(manifest("a"))  # the name is free again
    assert finished(c, "a").condition == "Complete"
    assert c.pod_log(pod.name).startswith("index 0 running")  # the old pod's log is kept


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


# 12 -----------------------------------------------------------------------------------------
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


# view ---------------------------------------------------------------------------------------
def test_the_read_only_view_sees_what_the_cluster_writes(cluster) -> None:
    c, _ = cluster
    c.create_job(manifest("viewed", completions=2, parallelism=2, labels={"run": "v"}))
    job = finished(c, "viewed")
    view = LocalClusterView(c.state_dir)
    wait_for(lambda: view.get_job("viewed") == c.get_job("viewed"), what="view up to date")
    assert view.get_job("viewed") == job
    assert view.list_jobs({"run": "v"}) == [job] and view.list_jobs({"run": "x"}) == []
    assert view.list_pods("viewed") == c.list_pods("viewed")
    assert view.list_pods("viewed", index=1) == c.list_pods("viewed", index=1)
    assert view.job_events("viewed") == c.job_events("viewed")
    pod = c.list_pods("viewed")[0].name
    assert view.pod_log(pod) == c.pod_log(pod)
    assert view.get_job("nope") is None and view.list_pods("nope") == []
    path = c.jobs_dir / "viewed.json"
    assert json.loads(path.read_text())["version"] == 1
    before = path.stat().st_mtime_ns
    c.wait_ticks(5)
    assert path.stat().st_mtime_ns == before  # written only when something changed
    for mutate in (
        lambda: view.create_job(manifest("x")),
        lambda: view.patch_job("viewed", parallelism=3),
        lambda: view.delete_job("viewed"),
    ):
        with pytest.raises(ClusterError, match="pipeline scale"):
            mutate()


# stop ---------------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def test_stop_leaves_no_pod_process_running(make_cluster, tmp_path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    stubborn = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open(os.path.join({str(pids)!r}, f'{{os.getpid()}}-{{child.pid}}'), 'w').close()\n"
        "time.sleep(600)\n"
    )
    c, _ = make_cluster(stop_grace_seconds=1.0)
    c.create_job(
        manifest(
            "stubborn", completions=2, parallelism=2, command=["python", "-c", stubborn], grace=1
        )
    )
    wait_for(lambda: len(list(pids.iterdir())) == 2, what="pods and their children started")
    all_pids = [int(x) for f in pids.iterdir() for x in f.name.split("-")]
    assert all(_alive(p) for p in all_pids)
    started = time.monotonic()
    c.stop()
    assert time.monotonic() - started < 10
    assert not [p for p in all_pids if _alive(p)]
    assert all(p.phase == "Failed" for p in c.list_pods("stubborn"))
    c.stop()  # idempotent
