"""Indexed Job manifests and waits for the local cluster's contract tests.

Pods are tiny `python -c` programs driven by env: `GO_<i>`/`GO` make index i wait for a file,
`EXIT_<i>` is its exit code, `FAIL_ONCE_<i>` makes its first attempt exit 1. Waits poll with
generous timeouts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from adapters.local.cluster.local_cluster import LocalCluster

from shared.ports.cluster import JobStatus, PodInfo

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
