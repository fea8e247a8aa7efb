"""The log export of the local cluster: Job events as GKE's exporter and Cloud Logging write them.

A core/v1 Event as the Job controller's recorder emits it, the LogEntry GKE's event exporter
writes for it, and what Cloud Logging stores (with `insertId` and `receiveTimestamp`): the
shape `shared.control.job_events.parse_log_entry` reads. Draws random ids and reads the clock unless
given `now`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def job_event(
    *,
    namespace: str,
    job_name: str,
    job_uid: str,
    reason: str,
    message: str,
    event_type: str = "Normal",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about a Job, as the Job controller's recorder emits it (count 1)."""
    stamp = _iso(now or datetime.now(UTC))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{job_name}.{uuid.uuid4().hex[:16]}",
            "namespace": namespace,
            "creationTimestamp": stamp,
        },
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job_name,
            "namespace": namespace,
            "uid": job_uid,
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": "job-controller"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "eventTime": None,
        "reportingComponent": "job-controller",
        "reportingInstance": "",
    }


def exported_log_entry(
    event: dict[str, Any], *, project: str, cluster: str, location: str
) -> dict[str, Any]:
    """The LogEntry GKE's event exporter writes for one Event (before Cloud Logging adds
    `insertId` and `receiveTimestamp`): `jsonPayload` is the Event without `count` and
    `firstTimestamp`, `timestamp` its `lastTimestamp`, `resource.type` `k8s_pod` for Pod
    events, `k8s_node` for Node events and `k8s_cluster` for the rest (Jobs included)."""
    payload = {k: v for k, v in event.items() if k not in ("count", "firstTimestamp")}
    obj = event.get("involvedObject") or {}
    labels = {"project_id": project, "location": location, "cluster_name": cluster}
    kind = obj.get("kind")
    if kind == "Pod" and obj.get("namespace") == (event.get("metadata") or {}).get("namespace"):
        resource = {
            "type": "k8s_pod",
            "labels": {**labels, "namespace_name": obj["namespace"], "pod_name": obj["name"]},
        }
    elif kind == "Node":
        resource = {"type": "k8s_node", "labels": {**labels, "node_name": obj.get("name", "")}}
    else:
        resource = {"type": "k8s_cluster", "labels": labels}
    return {
        "logName": f"projects/{project}/logs/events",
        "resource": resource,
        "severity": "WARNING" if event.get("type") == "Warning" else "INFO",
        "timestamp": event.get("lastTimestamp"),
        "jsonPayload": payload,
    }


def logging_received(entry: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """What Cloud Logging stores: the exporter's entry plus `insertId` and `receiveTimestamp`."""
    return {**entry, "insertId": uuid.uuid4().hex[:20], "receiveTimestamp": _iso(now or _now())}


def _now() -> datetime:
    return datetime.now(UTC)


def make_log_entry(
    *,
    project: str,
    cluster: str,
    location: str,
    namespace: str,
    job_name: str,
    job_uid: str,
    reason: str,
    message: str,
    event_type: str = "Normal",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A Job event's LogEntry as the log sink publishes it (exported, then stored by Logging)."""
    event = job_event(
        namespace=namespace,
        job_name=job_name,
        job_uid=job_uid,
        reason=reason,
        message=message,
        event_type=event_type,
        now=now,
    )
    exported = exported_log_entry(event, project=project, cluster=cluster, location=location)
    return logging_received(exported, now)
