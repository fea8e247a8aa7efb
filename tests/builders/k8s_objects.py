"""Kubernetes objects in their wire form (camelCase dicts, as the API server returns them),
for the wire-mapping and GKE adapter tests."""

from __future__ import annotations

from typing import Any

T0 = "2025-06-01T10:00:00Z"


def job(
    *,
    completions: int | None = 10,
    parallelism: int | None = 4,
    suspend: bool = False,
    **status: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "suspend": suspend,
        "backoffLimitPerIndex": 2,
        "maxFailedIndexes": 3,
        "template": {"spec": {"containers": [{"name": "worker", "image": "img"}]}},
    }
    if completions is not None:
        spec["completions"] = completions
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pcg-demo-ingest-l2-abc123",
            "namespace": "default",
            "uid": "2f1e0c1a-0000-4000-8000-000000000001",
            "creationTimestamp": T0,
            "labels": {"cave-pipeline/run": "r1", "cave-pipeline/layer": "2"},
            "annotations": {"cave-pipeline/run-id": "r1"},
        },
        "spec": spec,
        "status": status,
    }


def pod(
    index: int,
    phase: str,
    *,
    state: dict[str, Any] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    node: str | None = "gk3-autopilot-spot-pool-1-abcd",
    started: str | None = T0,
    reason: str | None = None,
    extra_containers: int = 0,
) -> dict[str, Any]:
    name = f"pcg-demo-ingest-l2-abc123-{index}-x7k2p"
    containers = [
        {
            "name": "worker",
            "image": "img",
            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
        }
    ]
    statuses = [
        {
            "name": "worker",
            "image": "img",
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": state or {},
        }
    ]
    for i in range(extra_containers):  # e.g. a sidecar listed before the worker
        containers.insert(
            0, {"name": f"side{i}", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        )
        statuses.insert(
            0,
            {
                "name": f"side{i}",
                "image": "side",
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": T0}},
            },
        )
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if started:
        status["startTime"] = started
    if state is not None:
        status["containerStatuses"] = statuses
    if reason:
        status["reason"] = reason
    spec: dict[str, Any] = {"containers": containers, "restartPolicy": "Never"}
    if node:
        spec["nodeName"] = node
    labels = {
        "batch.kubernetes.io/controller-uid": "2f1e0c1a",
        "batch.kubernetes.io/job-completion-index": str(index),
        "batch.kubernetes.io/job-name": "pcg-demo-ingest-l2-abc123",
        "controller-uid": "2f1e0c1a",
        "job-name": "pcg-demo-ingest-l2-abc123",
        "cave-pipeline/layer": "2",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "uid": f"uid-{index}-{phase}",
            "creationTimestamp": T0,
            "labels": labels,
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": spec,
        "status": status,
    }


INVALID = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'Job.batch "pcg-x" is invalid: spec.maxFailedIndexes: Invalid value: 5: '
    "must be less than or equal to completions",
    "reason": "Invalid",
    "details": {
        "name": "pcg-x",
        "group": "batch",
        "kind": "Job",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 5: must be less than or equal to completions",
                "field": "spec.maxFailedIndexes",
            },
            {
                "reason": "FieldValueRequired",
                "message": "Required value",
                "field": "spec.template.spec.containers[0].image",
            },
        ],
    },
    "code": 422,
}
