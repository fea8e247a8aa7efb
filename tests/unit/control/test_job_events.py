"""The Job-event parser on hand-written GKE LogEntry shapes, and the exporter's shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.local.log_export import (
    exported_log_entry,
    job_event,
    logging_received,
    make_log_entry,
)
from shared.control.job_events import BadEventError, parse_log_entry

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gke_log_entries"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.mark.parametrize(
    ("name", "reason", "event_type", "stamp"),
    [
        ("job_successful_create", "SuccessfulCreate", "Normal", "2026-11-30T14:02:11+00:00"),
        ("job_completed", "Completed", "Normal", "2026-11-30T14:31:40+00:00"),
        ("job_backoff_limit_exceeded", "BackoffLimitExceeded", "Warning", "2026-11-30T14:20:05"),
    ],
)
def test_fixture_job_entries_parse(name: str, reason: str, event_type: str, stamp: str) -> None:
    raw = fixture(name)
    event = parse_log_entry(json.dumps(raw).encode())
    assert event.reason == reason and event.event_type == event_type
    assert event.job_name == "pcg-h01-ingest-l2-7f3a9c" and event.namespace == "pipeline"
    assert event.insert_id == raw["insertId"]
    assert event.timestamp == datetime.fromisoformat(stamp).replace(tzinfo=UTC)


def test_the_exported_entries_carry_neither_count_nor_first_timestamp() -> None:
    for path in FIXTURES.glob("*.json"):
        payload = json.loads(path.read_text())["jsonPayload"]
        assert "count" not in payload and "firstTimestamp" not in payload, path.name


def test_a_pod_event_is_not_a_job_event() -> None:
    with pytest.raises(BadEventError, match="not about a Job"):
        parse_log_entry(fixture("pod_killing"))


def test_the_entry_timestamp_is_the_events_time_without_last_timestamp() -> None:
    raw = fixture("job_completed")
    del raw["jsonPayload"]["lastTimestamp"]
    assert parse_log_entry(raw).timestamp == datetime(2026, 11, 30, 14, 31, 40, tzinfo=UTC)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda e: e.pop("jsonPayload"), "no jsonPayload"),
        (lambda e: e["jsonPayload"]["involvedObject"].update(kind="Pod"), "not about a Job"),
        (lambda e: e.update(timestamp="yesterday"), "bad timestamp"),
    ],
)
def test_malformed_entries_name_what_is_wrong(mutate, message: str) -> None:
    raw = fixture("job_completed")
    mutate(raw)
    with pytest.raises(BadEventError, match=message):
        parse_log_entry(raw)


def _shape(entry: dict) -> tuple:
    """Keys of the entry and of its payload, with the resource's labels."""
    payload = entry["jsonPayload"]
    return (
        sorted(entry),
        sorted(k for k in payload if k != "metadata"),
        sorted(payload["involvedObject"]),
        entry["resource"]["type"],
        sorted(entry["resource"]["labels"]),
    )


def test_our_job_entries_have_the_fixture_shape() -> None:
    ours = make_log_entry(
        project="p",
        cluster="c",
        location="l",
        namespace="pipeline",
        job_name="j",
        job_uid="u",
        reason="Completed",
        message="Job completed",
    )
    recorded = fixture("job_completed")
    recorded["jsonPayload"]["involvedObject"].pop("resourceVersion")  # not modelled
    assert _shape(ours) == _shape(recorded)
    assert ours["timestamp"] == ours["jsonPayload"]["lastTimestamp"]


def test_pod_events_are_exported_as_k8s_pod_entries() -> None:
    event = job_event(namespace="pipeline", job_name="j", job_uid="u", reason="Killing", message="")
    event["involvedObject"] = {"kind": "Pod", "name": "j-0-abcde", "namespace": "pipeline"}
    entry = logging_received(exported_log_entry(event, project="p", cluster="c", location="l"))
    assert entry["resource"] == fixture("pod_killing")["resource"] | {
        "labels": {
            "project_id": "p",
            "location": "l",
            "cluster_name": "c",
            "namespace_name": "pipeline",
            "pod_name": "j-0-abcde",
        }
    }
    assert entry["insertId"]
