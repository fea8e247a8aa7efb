"""The tick's publish time as the function sees it: through functions-framework's own
decoding of the three envelopes a tick arrives in (the local Eventarc stand-in's binary
CloudEvent, a Pub/Sub push body as terraform's push subscriptions send it, Cloud Scheduler's
message without attributes), Pub/Sub's nanosecond stamps included."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import functions_framework
import pytest
from cloudevents.http import CloudEvent

from adapters.local.eventarc import cloud_event_request, functions_source

PUBLISHED = datetime(2026, 12, 1, 19, 0, 0, 123456, tzinfo=UTC)
PROBE = """
import functions_framework
SEEN = []

@functions_framework.cloud_event
def probe(cloud_event):
    SEEN.append(cloud_event)
"""


@pytest.fixture(scope="module")
def main() -> Any:
    """functions/main.py as a module of its own (functions-framework loads it as `main`)."""
    spec = importlib.util.spec_from_file_location("functions_main_under_test", functions_source())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[CloudEvent]]:
    source = tmp_path_factory.mktemp("fn") / "tick_probe.py"
    source.write_text(PROBE)
    app = functions_framework.create_app("probe", str(source), "cloudevent")
    return app.test_client(), sys.modules["tick_probe"].SEEN


def delivered(probe, headers: dict[str, str], body: str | bytes) -> CloudEvent:
    client, seen = probe
    assert client.post("/", headers=headers, data=body).status_code == 200
    return seen[-1]


def test_the_local_eventarc_envelope_carries_the_publish_time(main, probe) -> None:
    message = SimpleNamespace(
        data=b'{"at": "now"}', attributes={}, message_id="41", publish_time=PUBLISHED
    )
    headers, body = cloud_event_request("p", "ticks", "ticks-fn", message)
    assert main.publish_time(delivered(probe, headers, body)) == PUBLISHED


PUSH_TIMES = {
    "Pub/Sub's nanoseconds": ("2026-12-01T19:00:00.123456789Z", PUBLISHED),
    "milliseconds": ("2026-12-01T19:00:00.123Z", PUBLISHED.replace(microsecond=123000)),
    "an offset": ("2026-12-01T20:00:00.123456+01:00", PUBLISHED),
}


@pytest.mark.parametrize(("stamp", "want"), PUSH_TIMES.values(), ids=PUSH_TIMES.keys())
def test_a_push_body_without_attributes_is_converted_with_its_publish_time(
    main, probe, stamp: str, want: datetime
) -> None:
    body = {  # Cloud Scheduler's tick through a push subscription: no `attributes`
        "message": {
            "data": base64.b64encode(b'{"at": "now"}').decode(),
            "messageId": "42",
            "message_id": "42",
            "publishTime": stamp,
            "publish_time": stamp,
        },
        "subscription": "projects/p/subscriptions/ticks-trigger",
    }
    event = delivered(probe, {"Content-Type": "application/json"}, json.dumps(body))
    assert event["id"] == "42"
    assert main.publish_time(event) == want


def test_without_a_message_time_the_cloudevent_time_is_used(main) -> None:
    attrs = {"id": "1", "source": "//pubsub.googleapis.com/x", "type": "t", "specversion": "1.0"}
    attrs["time"] = "2026-12-01T19:00:00.123456Z"
    assert main.publish_time(CloudEvent(attrs, {"message": {}})) == PUBLISHED
    assert main.publish_time(CloudEvent(attrs, {"message": {"publishTime": "soon"}})) == PUBLISHED
    assert main.publish_time(CloudEvent(attrs, None)) == PUBLISHED


def test_the_stand_in_sends_what_functions_framework_reads(probe) -> None:
    message = SimpleNamespace(data=b"{}", attributes={}, message_id="43", publish_time=PUBLISHED)
    headers, body = cloud_event_request("p", "ticks", "ticks-fn", message)
    event = delivered(probe, headers, body)
    assert event.data["message"]["publishTime"] == "2026-12-01T19:00:00.123456Z"
    assert Path(functions_source()).name == "main.py"
