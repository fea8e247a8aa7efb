"""Kubernetes Job events as Cloud Logging LogEntries (the `job-events` topic's schema).

GKE's event exporter writes Kubernetes events to Cloud Logging (`logName .../logs/events`,
resource type `k8s_cluster` for Jobs, `jsonPayload` the v1 Event without `count` and
`firstTimestamp`, `timestamp` from `lastTimestamp`; Logging adds `insertId`); a log sink
filtered on `involvedObject.kind="Job"` publishes each LogEntry as JSON in the Pub/Sub
message data. The local cluster emits the same shape (tests/fixtures/gke_log_entries holds
recorded examples). Parsing is pure; `make_log_entry` (for the local cluster) draws random
ids and reads the clock unless given `now`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Cloud Logging refuses LogEntries over 256 KB, so a larger message cannot come from the sink.
MAX_ENTRY_BYTES = 256 * 1024


class BadEventError(ValueError):
    """A message is not a Job-event LogEntry; permanent (acknowledge, do not retry)."""


@dataclass(frozen=True)
class JobEvent:
    insert_id: str
    job_name: str
    namespace: str
    reason: str
    message: str
    timestamp: datetime
    event_type: str = "Normal"


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


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_log_entry(data: bytes | str | dict[str, Any]) -> JobEvent:
    """Decode a LogEntry (JSON bytes or dict). Raises BadEventError naming what is missing."""
    if isinstance(data, bytes | str) and len(data) > MAX_ENTRY_BYTES:
        raise BadEventError(
            f"job event too large ({len(data)} bytes > {MAX_ENTRY_BYTES}, Cloud Logging's "
            "limit for one LogEntry): not from the log sink"
        )
    try:
        entry = data if isinstance(data, dict) else json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BadEventError(f"job event is not JSON: {e}") from None
    if not isinstance(entry, dict):
        raise BadEventError("job event is not a JSON object")
    payload = entry.get("jsonPayload")
    if not isinstance(payload, dict):
        raise BadEventError("job event has no jsonPayload (is the log sink filter right?)")
    obj = payload.get("involvedObject") or {}
    if not isinstance(obj, dict) or obj.get("kind") != "Job" or not obj.get("name"):
        raise BadEventError(f"event is not about a Job: involvedObject={obj!r}")
    stamp = entry.get("timestamp") or payload.get("lastTimestamp")
    try:
        ts = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        raise BadEventError(f"job event has a bad timestamp {stamp!r}") from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return JobEvent(
        insert_id=str(entry.get("insertId") or _dict(payload.get("metadata")).get("name", "")),
        job_name=obj["name"],
        namespace=obj.get("namespace", ""),
        reason=str(payload.get("reason", "")),
        message=str(payload.get("message", "")),
        timestamp=ts,
        event_type=str(payload.get("type", "Normal")),
    )
