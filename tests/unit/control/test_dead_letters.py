"""shared.control.dead_letters: the message_dead_lettered alert built from a dead-lettered
message."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from adapters.local.log_export import make_log_entry
from shared.control import dead_letters as dl

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def attrs(subscription: str = "kick-trigger", count: str = "10", **extra: str) -> dict[str, str]:
    """Attributes as Pub/Sub sets them on a dead-lettered message."""
    return {
        dl.ATTR_SUBSCRIPTION: subscription,
        dl.ATTR_SUBSCRIPTION_PROJECT: "proj",
        dl.ATTR_DELIVERY_COUNT: count,
        dl.ATTR_PUBLISH_TIME: "2026-05-01T11:00:00.123Z",
        **extra,
    }


@pytest.mark.parametrize(
    ("subscription", "topic"),
    [
        ("kick-trigger", "kick"),
        ("job-events-trigger", "job-events"),
        ("projects/p/subscriptions/ticks-trigger", "ticks"),
        ("alerts-operator", None),
        ("-trigger", None),
    ],
)
def test_source_topic_from_the_subscription_name(subscription, topic):
    assert dl.source_topic(subscription) == topic


def test_kick_alert_names_topic_function_attempts_and_run():
    data = json.dumps({"run_id": "r1", "action": "approve", "by": "op"}).encode()
    body = dl.alert_body(data, attrs(origin="cli"), "m-7", NOW)
    assert body["kind"] == "message_dead_lettered"
    assert body["topic"] == "kick" and body["function"] == "on-kick"
    assert body["subscription"] == "proj/kick-trigger"
    assert body["delivery_attempts"] == 10
    assert body["first_published"] == "2026-05-01T11:00:00.123Z"
    assert body["message_id"] == "m-7"
    assert body["at"] == NOW.isoformat()
    assert body["run_id"] == "r1"
    assert body["subject"] == {"run_id": "r1", "action": "approve"}
    # Pub/Sub's own attributes are summarised, the publisher's kept
    assert body["attributes"] == {"origin": "cli"}
    assert "on-kick did not acknowledge this kick message after 10 deliveries" in body["error"]
    assert body["logs_filter"] == (
        'resource.type="cloud_run_revision" AND resource.labels.service_name="on-kick" '
        'AND severity>=ERROR AND timestamp>="2026-05-01T11:00:00.123Z"'
    )
    assert json.loads(body["payload_excerpt"])["run_id"] == "r1"
    assert body["payload_encoding"] == "utf-8" and body["payload_truncated"] is False
    assert body["payload_bytes"] == len(data)
    json.dumps(body)  # publishable as is


def test_job_event_alert_names_the_job():
    entry = make_log_entry(
        project="p",
        cluster="c",
        location="l",
        namespace="default",
        job_name="j-1",
        job_uid="u",
        reason="Completed",
        message="Job completed",
    )
    body = dl.alert_body(json.dumps(entry).encode(), attrs("job-events-trigger"), "m", NOW)
    assert body["function"] == "on-job-event"
    assert body["subject"] == {"job": "j-1", "reason": "Completed"}
    assert body["run_id"] is None


@pytest.mark.parametrize("data", [b"not json", b"[1, 2]", b"{}", b""])
def test_unreadable_payloads_still_alert(data):
    body = dl.alert_body(data, attrs(), "m", NOW)
    assert body["subject"] == {} and body["run_id"] is None
    assert body["payload_excerpt"] == data.decode()


def test_unknown_source_and_missing_attributes():
    body = dl.alert_body(b"x", {}, "m", NOW)
    assert body["topic"] is None and body["function"] is None and body["subscription"] is None
    assert body["delivery_attempts"] is None and body["logs_filter"] is None
    assert "its subscriber did not acknowledge this unknown-topic message" in body["error"]
    body = dl.alert_body(b"x", attrs("other-sub", count="many"), "m", NOW)
    assert body["topic"] is None and body["subscription"] == "proj/other-sub"
    assert body["delivery_attempts"] is None
    assert "the subscriber of other-sub" in body["error"]


def test_payload_excerpt_is_capped():
    data = b"a" * (dl.EXCERPT_BYTES + 1000)
    body = dl.alert_body(data, attrs(), "m", NOW)
    assert body["payload_excerpt"] == "a" * dl.EXCERPT_BYTES
    assert body["payload_truncated"] is True and body["payload_bytes"] == len(data)
    assert len(json.dumps(body)) < dl.EXCERPT_BYTES + 2048


def test_excerpt_drops_a_character_cut_by_the_cap():
    excerpt, encoding, truncated = dl.payload_excerpt("é".encode() * 3, limit=3)
    assert (excerpt, encoding, truncated) == ("é", "utf-8", True)


def test_binary_payload_is_base64():
    data = bytes(range(256)) * 40
    excerpt, encoding, truncated = dl.payload_excerpt(data)
    assert encoding == "base64" and truncated
    assert base64.b64decode(excerpt) == data[: dl.EXCERPT_BYTES]


def test_alert_attributes():
    body = dl.alert_body(b"{}", attrs("ticks-trigger"), "m", NOW)
    assert dl.alert_attributes(body) == {"kind": "message_dead_lettered", "source_topic": "ticks"}
    assert dl.alert_attributes(dl.alert_body(b"{}", {}, "m", NOW)) == {
        "kind": "message_dead_lettered"
    }
