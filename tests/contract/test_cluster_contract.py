"""The `shared.ports.cluster.Cluster` contract, one set of tests for every implementation.

`kubernetes`: Kubernetes' own control plane on this machine (the real Job controller,
scheduler and pod GC) with the process kubelet, through the GKE adapter as the controller's
service account (terraform's RBAC), always.
`gke`: a remote cluster through `GkeCluster.from_kubeconfig()` (context
`PIPELINE_KUBE_CONTEXT`, namespace `PIPELINE_NAMESPACE`), only when KUBECONFIG is set; pods run
`python:3.12-slim` with the same `python -c` programs. Every test uses its own Job names and
deletes its Jobs afterwards.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from shared.ports.cluster import Cluster, JobStatus

# A remote cluster (GKE) joins only when a kubeconfig names one: then every case runs there too.
TARGETS = ["kubernetes"] + (["gke"] if os.environ.get("KUBECONFIG") else [])
IMAGE = "python:3.12-slim"
PRINT_INDEX = "import os; print('hello from index', os.environ['JOB_COMPLETION_INDEX'], flush=True)"
SLEEP = "import time; time.sleep(900)"


@dataclass
class Target:
    """One implementation under test, with the patience it needs (GKE Autopilot may have to
    provision a node and pull the image before a pod runs)."""

    kind: str
    cluster: Cluster
    timeout: float
    created: list[str] = field(default_factory=list)
    # Preempts a running pod as a Spot reclaim does (None: not possible on demand).
    preempt: Callable[[str], bool] | None = None


@pytest.fixture(scope="module", params=TARGETS)
def target(
    request: pytest.FixtureRequest,
) -> Iterator[Target]:
    if request.param == "kubernetes":
        from adapters.gke.cluster import GkeCluster

        kube = request.getfixturevalue("local_kubernetes")
        cluster = GkeCluster.from_kubeconfig(
            namespace=kube.namespace, config_file=str(kube.controller_kubeconfig)
        )
        yield Target("kubernetes", cluster, timeout=120.0, preempt=kube.evict)
        return
    from adapters.gke.cluster import GkeCluster

    namespace = os.environ.get("PIPELINE_NAMESPACE", "default")
    cluster = GkeCluster.from_kubeconfig(os.environ.get("PIPELINE_KUBE_CONTEXT"), namespace)
    yield Target("gke", cluster, timeout=900.0)


@pytest.fixture
def cluster(target: Target) -> Iterator[Target]:
    """The target, with every Job a test created deleted afterwards (real clusters bill)."""
    yield target
    while target.created:
        target.cluster.delete_job(target.created.pop())


def unique(prefix: str) -> str:
    return f"ct-{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    describe: Callable[[], str] | None = None,
) -> Any:
    """Poll until predicate() is truthy; return its value, or fail naming what was awaited
    (and what `describe()` says of the state then)."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; {describe()}" if describe is not None else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{seen}")
        time.sleep(delay)
        delay = min(delay * 1.5, 2.0)  # quick locally, gentle on a real API server


def manifest(
    name: str,
    code: str,
    *,
    completions: int = 1,
    parallelism: int = 1,
    suspend: bool = False,
    labels: dict[str, str] | None = None,
    max_failed: int | None = None,
) -> dict[str, Any]:
    """A small Indexed Job as the controller renders them (podFailurePolicy included)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"cave-pipeline/test": name, **(labels or {})}},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimitPerIndex": 1,
            "maxFailedIndexes": completions if max_failed is None else max_failed,
            "suspend": suspend,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "Ignore",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                    },
                    {
                        "action": "FailIndex",
                        "onExitCodes": {
                            "containerName": "worker",
                            "operator": "In",
                            "values": [42],
                        },
                    },
                ]
            },
            "template": {
                "metadata": {"labels": {"cave-pipeline/test": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "worker",
                            "image": IMAGE,
                            "command": ["python", "-c", code],
                            "resources": {
                                "requests": {"cpu": "250m", "memory": "512Mi"},
                                "limits": {"cpu": "250m", "memory": "512Mi"},
                            },
                        }
                    ],
                },
            },
        },
    }


def create(t: Target, body: dict[str, Any]) -> bool:
    t.created.append(body["metadata"]["name"])
    return t.cluster.create_job(body)


def finished(t: Target, name: str) -> JobStatus:
    def done() -> JobStatus | None:
        job = t.cluster.get_job(name)
        return job if job is not None and job.finished else None

    return wait_for(done, t.timeout, f"job {name} to finish")


# -- cases ---------------------------------------------------------------------------------


def test_create_is_true_then_false_for_the_same_name(cluster: Target) -> None:
    name = unique("dup")
    body = manifest(name, PRINT_INDEX, suspend=True)
    assert create(cluster, body) is True
    assert cluster.cluster.create_job(body) is False
    job = cluster.cluster.get_job(name)
    assert job is not None and job.name == name and job.suspended


def test_get_job_of_an_unknown_name_is_none(cluster: Target) -> None:
    assert cluster.cluster.get_job(unique("nobody")) is None


def test_list_jobs_filters_by_labels(cluster: Target) -> None:
    name, other = unique("listed"), unique("other")
    run = uuid.uuid4().hex[:10]
    create(cluster, manifest(name, PRINT_INDEX, suspend=True, labels={"cave-pipeline/run": run}))
    create(cluster, manifest(other, PRINT_INDEX, suspend=True))
    assert [j.name for j in cluster.cluster.list_jobs({"cave-pipeline/run": run})] == [name]


@pytest.fixture(scope="module")
def completed_job(target: Target) -> Iterator[tuple[str, JobStatus]]:
    """A 3-index Job whose pods print their index, run to completion (shared by the tests
    that read a finished Job: pods, logs, events)."""
    name = unique("done")
    assert target.cluster.create_job(manifest(name, PRINT_INDEX, completions=3, parallelism=3))
    try:
        yield name, finished(target, name)
    finally:
        target.cluster.delete_job(name)


def test_an_indexed_job_completes_every_index(target: Target, completed_job) -> None:
    name, job = completed_job
    assert (job.condition, job.completed_indexes, job.failed_indexes) == ("Complete", "0-2", "")
    assert (job.succeeded, job.completions, job.active) == (3, 3, 0)
    assert job.labels["cave-pipeline/test"] == name and not job.suspended
    assert job.start_time is not None and job.completion_time is not None
    assert job.start_time.tzinfo is not None and job.completion_time >= job.start_time


def test_list_pods_of_one_index(target: Target, completed_job) -> None:
    name, _ = completed_job
    pods = target.cluster.list_pods(name, 1)
    assert pods and all(p.index == 1 and p.job_name == name for p in pods)
    done = [p for p in pods if p.phase == "Succeeded"]
    assert len(done) == 1 and done[0].exit_code == 0
    # Autopilot may round requests up, never down.
    assert done[0].cpu_request >= 0.25 and done[0].memory_request_gib >= 0.5
    assert {p.index for p in target.cluster.list_pods(name)} == {0, 1, 2}


def test_pod_log_returns_what_the_pod_printed(target: Target, completed_job) -> None:
    name, _ = completed_job
    pod = next(p for p in target.cluster.list_pods(name, 2) if p.phase == "Succeeded")
    assert "hello from index 2" in target.cluster.pod_log(pod.name, tail_lines=10)


def test_job_events_contain_successful_create(target: Target, completed_job) -> None:
    name, _ = completed_job
    reasons = [e.get("reason") for e in target.cluster.job_events(name)]
    assert "SuccessfulCreate" in reasons


def test_patch_parallelism_and_suspend(cluster: Target) -> None:
    name = unique("patch")
    create(cluster, manifest(name, SLEEP, completions=4, parallelism=1))
    c = cluster.cluster
    c.patch_job(name, parallelism=2)
    assert c.get_job(name).parallelism == 2
    c.patch_job(name, suspend=True)
    job = c.get_job(name)
    assert job.suspended and job.parallelism == 2
    wait_for(lambda: c.get_job(name).active == 0, cluster.timeout, f"{name}'s pods to go")
    c.patch_job(name, parallelism=3, suspend=False)
    job = c.get_job(name)
    assert (job.suspended, job.parallelism, job.finished) == (False, 3, False)


def test_delete_job_removes_it(cluster: Target) -> None:
    name = unique("gone")
    create(cluster, manifest(name, SLEEP))
    cluster.cluster.delete_job(name)
    wait_for(lambda: cluster.cluster.get_job(name) is None, cluster.timeout, f"{name} to go")
    cluster.cluster.delete_job(name)  # deleting what is gone is fine


# -- failure policy: what the controller's layer states rest on -------------------------------

# Index 0 exits 42 (a fatal chunk), the others succeed.
FATAL_INDEX_0 = "import os, sys; sys.exit(42 if os.environ['JOB_COMPLETION_INDEX'] == '0' else 0)"
# Index 0 exits 1 (transient) on every attempt, the others succeed.
TRANSIENT_INDEX_0 = (
    "import os, sys; sys.exit(1 if os.environ['JOB_COMPLETION_INDEX'] == '0' else 0)"
)


def test_exit_42_fails_only_that_index_without_a_retry(cluster: Target) -> None:
    name = unique("fatal")
    create(cluster, manifest(name, FATAL_INDEX_0, completions=3, parallelism=3))
    job = finished(cluster, name)
    assert (job.completed_indexes, job.failed_indexes) == ("1,2", "0")  # as Kubernetes writes two
    assert (job.condition, job.reason) == ("Failed", "FailedIndexes")
    # FailIndex: no second attempt, although backoffLimitPerIndex allows one.
    assert len(cluster.cluster.list_pods(name, 0)) == 1


def test_a_transient_index_is_retried_up_to_its_backoff_limit(cluster: Target) -> None:
    name = unique("retry")
    create(cluster, manifest(name, TRANSIENT_INDEX_0, completions=2, parallelism=2))
    job = finished(cluster, name)
    assert (job.completed_indexes, job.failed_indexes) == ("1", "0")
    assert len(cluster.cluster.list_pods(name, 0)) == 2  # backoffLimitPerIndex 1: two tries


def test_max_failed_indexes_exceeded_fails_the_job_at_once(cluster: Target) -> None:
    name = unique("maxfail")
    create(cluster, manifest(name, FATAL_INDEX_0, completions=3, parallelism=1, max_failed=0))
    job = finished(cluster, name)
    assert (job.condition, job.reason) == ("Failed", "MaxFailedIndexesExceeded")
    assert "0" in job.failed_indexes


def test_a_disrupted_pod_costs_its_index_no_retry(cluster: Target) -> None:
    if cluster.preempt is None:
        pytest.skip("preempting a pod on demand needs a local cluster (GKE: drain a node)")
    name = unique("spot")
    create(cluster, manifest(name, SLEEP, completions=1, parallelism=1))
    c = cluster.cluster
    pod = wait_for(
        lambda: next((p for p in c.list_pods(name) if p.phase == "Running"), None),
        cluster.timeout,
        f"{name}'s pod to run",
    )
    assert cluster.preempt(pod.name)
    # The Ignore rule: a replacement pod, and the index has not failed (its one retry unused).
    wait_for(
        lambda: any(p.name != pod.name and p.phase == "Running" for p in c.list_pods(name, 0)),
        cluster.timeout,
        f"{name}'s replacement pod",
        lambda: _pods_and_job(c, name),
    )
    job = c.get_job(name)
    assert (job.failed_indexes, job.finished) == ("", False)


def _pods_and_job(c: Any, name: str) -> str:
    """A Job's pods (phase, node, reasons) and its status, for a failure's message."""
    pods = ", ".join(
        f"{p.name} {p.phase} on {p.node or '-'} ({p.reason}, {p.disruption_reason})"
        for p in c.list_pods(name, 0)
    )
    return f"pods: {pods or 'none'}; job: {c.get_job(name)}"


# Prints a line, then blocks: a hung worker.
PRINT_THEN_SLEEP = "import time; print('working', flush=True); time.sleep(900)"


def test_a_deleted_pod_is_a_failed_attempt_and_its_index_is_retried(cluster: Target) -> None:
    """What the controller's hung-pod check rests on: `pod_log_updated` dates the newest log
    line, and `delete_pod` costs the index one attempt (no DisruptionTarget), which the Job
    retries; past its backoff limit the index fails."""
    name = unique("hung")
    create(cluster, manifest(name, PRINT_THEN_SLEEP, completions=1, parallelism=1))
    c = cluster.cluster

    def running_logged(exclude: set[str]) -> Any:
        for p in c.list_pods(name, 0):
            if p.phase == "Running" and p.name not in exclude and c.pod_log_updated(p.name):
                return p
        return None

    first = wait_for(lambda: running_logged(set()), cluster.timeout, f"{name}'s pod to log")
    stamp = c.pod_log_updated(first.name)
    assert stamp is not None and stamp.tzinfo is not None
    assert first.started is not None and stamp >= first.started - timedelta(seconds=1)
    c.delete_pod(first.name)
    second = wait_for(
        lambda: running_logged({first.name}), cluster.timeout, f"{name}'s retried pod"
    )
    assert c.get_job(name).failed_indexes == ""  # backoffLimitPerIndex 1: one retry used
    c.delete_pod(second.name)
    c.delete_pod(second.name)  # a repeated delete is fine
    job = finished(cluster, name)
    assert (job.condition, job.failed_indexes) == ("Failed", "0")
    c.delete_pod(second.name)  # and so is deleting what is gone


def test_validate_job_accepts_a_valid_job_and_names_what_is_wrong(cluster: Target) -> None:
    from shared.ports.cluster import ManifestRejectedError

    name = unique("dry")
    good = manifest(name, PRINT_INDEX)
    cluster.cluster.validate_job(good)  # a dry run: nothing is created
    assert cluster.cluster.get_job(name) is None
    bad = manifest(name, PRINT_INDEX, completions=2)
    bad["spec"]["maxFailedIndexes"] = 5  # more than completions: refused by the API server
    with pytest.raises(ManifestRejectedError, match="maxFailedIndexes"):
        cluster.cluster.validate_job(bad)
