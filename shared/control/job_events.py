"""Kubernetes Job events as Cloud Logging LogEntries (the `job-events` topic's schema).

GKE's event exporter writes Kubernetes events to Cloud Logging (`logName .../logs/events`,
resource type `k8s_cluster` for Jobs, `jsonPayload` the v1 Event without `count` and
`firstTimestamp`, `timestamp` from `lastTimestamp`; Logging adds `insertId`); a log sink
filtered on `involvedObject.kind="Job"` publishes each LogEntry as JSON in the Pub/Sub
message data. The local stack's log sink emits the same shape (its producer is
`adapters.local.log_export`; tests/fixtures/gke_log_entries holds recorded
examples). Pure: parsing only.
"""

from __future__ import annotations

import json
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
