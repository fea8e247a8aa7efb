"""Indexed Job manifests and waits for the contract tests of local Kubernetes (and any Cluster).

Pods are tiny `python -c` programs driven by env: `GO_<i>`/`GO` make index i wait for a file,
`EXIT_<i>` is its exit code, `FAIL_ONCE_<i>` makes its first attempt exit 1, and
`TERM_WAIT_<i>`/`TERM_WAIT` make it, once sent SIGTERM, wait for a file before it exits 143
(a pod whose termination takes as long as the test wants, within its grace period). Waits poll
with generous timeouts: the real Job controller is slower than a test's patience should be.

The helpers that take a `KubeCluster` (`raw_job`, `conditions`, `settled`) read the Job as the
API server stores it, where `JobStatus` (the controller's view, `adapters.gke.wire`) folds
Kubernetes' interim conditions into the terminal ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import pytest

from shared.ports.cluster import Cluster, JobStatus, PodInfo

if TYPE_CHECKING:
    from tests.builders.kube_cluster import KubeCluster

TIMEOUT = 120.0

WORKER = """
import os, signal, sys, time
i = os.environ["JOB_COMPLETION_INDEX"]
hold = os.environ.get(f"TERM_WAIT_{i}", os.environ.get("TERM_WAIT", ""))
if hold:
    def on_term(*_):
        while not os.path.exists(hold):
            time.sleep(0.02)
        sys.exit(143)
    signal.signal(signal.SIGTERM, on_term)
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

# GKE's Spot taint and label (adapters.local.kubelet.node): a pod with these runs on a Spot node.
SPOT_KEY = "cloud.google.com/gke-spot"
ON_SPOT = {
    "tolerations": [
        {"key": SPOT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ],
    "nodeSelector": {SPOT_KEY: "true"},
}


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
    pod_spec: dict[str, Any] | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    """A minimal valid Indexed Job manifest, as the controller would send it; `pod_spec` adds
    to the pod template's spec (e.g. `ON_SPOT`), `spec_extra` to the Job's."""
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
                **(pod_spec or {}),
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
    """Poll until predicate() is truthy; return its value or fail naming what was awaited
    (quick at first, then gentle on the API server)."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what or predicate}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def finished(cluster: Cluster, name: str) -> JobStatus:
    """The Job once the controller's view of it is terminal (`JobStatus.finished`: on
    Kubernetes 1.31+ that is FailureTarget or SuccessCriteriaMet already; see `settled`)."""
    return wait_for(
        lambda: (j := cluster.get_job(name)) is not None and j.finished and j,
        what=f"job {name} to finish",
    )


def running(cluster: Cluster, name: str, n: int, exclude: Collection[str] = ()) -> list[PodInfo]:
    """Wait until exactly n pods of the Job (not in `exclude`: pods deleted but still
    terminating) are Running, the Job counts n ready, and each has logged its first line."""

    def check() -> list[PodInfo] | None:
        pods = [
            p for p in cluster.list_pods(name) if p.phase == "Running" and p.name not in exclude
        ]
        job = cluster.get_job(name)
        if len(pods) != n or job is None or job.ready != n:
            return None
        logs_ok = all("running" in cluster.pod_log(p.name) for p in pods)
        return pods if logs_ok else None

    return wait_for(check, what=f"{n} running pods of {name}")


def reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events]


# -- the Job as stored (local Kubernetes) --------------------------------------------------------


def raw_job(kc: KubeCluster, name: str) -> dict[str, Any] | None:
    """The batch/v1 Job as the API server has it (None if there is none)."""
    assert kc.kube.admin is not None
    path = f"/apis/batch/v1/namespaces/{kc.kube.namespace}/jobs/{name}"
    return kc.kube.admin.request("GET", path, ok=(404,))


def pod_annotations(kc: KubeCluster, pod_name: str) -> dict[str, str]:
    """A pod's annotations as stored (the Job controller's per-index counts among them)."""
    assert kc.kube.admin is not None
    path = f"/api/v1/namespaces/{kc.kube.namespace}/pods/{pod_name}"
    return ((kc.kube.admin.request("GET", path) or {}).get("metadata") or {}).get(
        "annotations"
    ) or {}


def conditions(kc: KubeCluster, name: str) -> list[tuple[str, str]]:
    """(type, reason) of the Job's True conditions, in the order the Job controller added
    them."""
    job = raw_job(kc, name) or {}
    return [
        (c["type"], c.get("reason", ""))
        for c in (job.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    ]


def settled(kc: KubeCluster, name: str) -> JobStatus:
    """The Job once Kubernetes has written its final condition, Complete or Failed: on 1.31+
    only after every pod has terminated (FailureTarget / SuccessCriteriaMet come first), so
    its counts are final; by then no pod of it is Pending or Running."""
    wait_for(
        lambda: {"Complete", "Failed"} & {t for t, _ in conditions(kc, name)},
        what=f"job {name}'s final condition",
    )
    pods = kc.list_pods(name)
    assert not [p.name for p in pods if p.phase in ("Pending", "Running")], pods
    job = kc.get_job(name)
    assert job is not None
    return job
