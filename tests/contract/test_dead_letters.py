"""Dead letters end to end on the Pub/Sub emulator, through functions-framework.

The path as deployed (terraform/functions.tf): a `<topic>-trigger` subscription with a
dead-letter policy pushes each message to its function as a plain Pub/Sub push body (no
CloudEvent headers); a non-2xx answer is a failed delivery; after max_delivery_attempts the
emulator - like Pub/Sub - forwards the message to `dead-letters` with its
CloudPubSubDeadLetter* attributes, and `on_dead_letter` turns it into a
`message_dead_lettered` alert on `alerts`.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import functions_framework
import pytest
from google.protobuf.json_format import MessageToDict

from adapters import wiring
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import TOPICS, PubSubBus
from adapters.local.eventarc import functions_source
from shared.config.config_files import load_config
from shared.control import dead_letters
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import RecordingCluster

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"
MAX_ATTEMPTS = 5  # the emulator, like Pub/Sub, accepts 5..100; terraform's default is 10


@pytest.fixture
def env(firestore_project, monkeypatch):
    """One project for Firestore and Pub/Sub, the topics, the kick trigger subscription with
    its dead-letter policy (as terraform creates it) and pull subscriptions on the rest."""
    monkeypatch.setenv("PIPELINE_PROJECT", firestore_project)
    bus = PubSubBus(firestore_project)
    for topic in (*TOPICS, dead_letters.DEAD_LETTER_TOPIC):
        bus.ensure_topic(topic)
    trigger = bus.subscription_path("kick-trigger")
    bus.subscriber.create_subscription(
        request={
            "name": trigger,
            "topic": bus.topic_path("kick"),
            "ack_deadline_seconds": 10,
            "dead_letter_policy": {
                "dead_letter_topic": bus.topic_path(dead_letters.DEAD_LETTER_TOPIC),
                "max_delivery_attempts": MAX_ATTEMPTS,
            },
        }
    )
    dead_sub = bus.ensure_subscription(dead_letters.DEAD_LETTER_TOPIC, "dead-letters-trigger")
    alerts_sub = bus.ensure_subscription("alerts", "alerts-test")
    cluster = RecordingCluster()
    with wiring.in_process_functions(cluster):
        yield bus, cluster, trigger, dead_sub, alerts_sub
    bus.close()


def client(target: str):
    app = functions_framework.create_app(target, str(functions_source()), "cloudevent")
    return app.test_client()


def push(target: str, subscription: str, received) -> int:
    """Deliver a pulled message to `target` as a push subscription does (a plain JSON body,
    no CloudEvent headers); the HTTP status."""
    message = MessageToDict(received.message._pb)  # data (base64), attributes, messageId, ...
    body = {
        "message": {**message, "message_id": message["messageId"]},
        "subscription": subscription,
        "deliveryAttempt": received.delivery_attempt,
    }
    headers = {"Content-Type": "application/json"}
    return client(target).post("/", headers=headers, data=json.dumps(body)).status_code


def pull_one(bus: PubSubBus, subscription: str):
    response = bus.subscriber.pull(subscription=subscription, max_messages=1, timeout=10)
    assert len(response.received_messages) == 1, f"nothing to pull on {subscription}"
    return response.received_messages[0]


def start_run(store: FirestoreRunStore) -> str:
    run = new_run(load_config(DEMO), "r-dl", ["ingest"], "auto", datetime.now(UTC))
    store.create_run(run)
    return run.run_id


def test_a_kick_that_keeps_failing_is_dead_lettered_and_alerted(env, firestore_project):
    bus, cluster, trigger, dead_sub, alerts_sub = env
    run_id = start_run(FirestoreRunStore(firestore_project))
    cluster.unreachable.add("create_job")  # a transient error that never clears
    bus.publish_json("kick", {"run_id": run_id, "action": "start", "by": "op"}, origin="cli")

    statuses = []
    for _ in range(MAX_ATTEMPTS):
        received = pull_one(bus, trigger)
        statuses.append(push("on_kick", trigger, received))
        assert statuses[-1] != 200
        # the non-2xx answer is a nack: the push subscription redelivers
        bus.subscriber.modify_ack_deadline(
            subscription=trigger, ack_ids=[received.ack_id], ack_deadline_seconds=0
        )
    assert statuses == [500] * MAX_ATTEMPTS
    # no further delivery: the emulator forwards the message when it would be due again
    again = bus.subscriber.pull(subscription=trigger, max_messages=1, timeout=5)
    assert again.received_messages == []

    dead = pull_one(bus, dead_sub)
    assert dead.message.attributes[dead_letters.ATTR_SUBSCRIPTION] == "kick-trigger"
    assert push("on_dead_letter", dead_sub, dead) == 200
    bus.subscriber.acknowledge(subscription=dead_sub, ack_ids=[dead.ack_id])

    alert = pull_one(bus, alerts_sub)
    assert dict(alert.message.attributes) == {
        "kind": "message_dead_lettered",
        "source_topic": "kick",
    }
    body = json.loads(alert.message.data)
    assert body["kind"] == "message_dead_lettered"
    assert body["topic"] == "kick" and body["function"] == "on-kick"
    assert body["subscription"] == f"{firestore_project}/kick-trigger"
    assert body["delivery_attempts"] == MAX_ATTEMPTS
    assert body["run_id"] == run_id and body["subject"]["action"] == "start"
    assert body["attributes"] == {"origin": "cli"}
    assert json.loads(body["payload_excerpt"])["run_id"] == run_id
    assert "on-kick did not acknowledge" in body["error"]
    assert 'resource.labels.service_name="on-kick"' in body["logs_filter"]
    assert body["first_published"]
    assert cluster.creates == []


def test_a_kick_that_succeeds_is_not_dead_lettered(env, firestore_project):
    bus, cluster, trigger, dead_sub, _ = env
    run_id = start_run(FirestoreRunStore(firestore_project))
    bus.publish_json("kick", {"run_id": run_id})
    received = pull_one(bus, trigger)
    assert push("on_kick", trigger, received) == 200  # the plain push body works as Eventarc's did
    bus.subscriber.acknowledge(subscription=trigger, ack_ids=[received.ack_id])
    assert len(cluster.creates) == 1
    response = bus.subscriber.pull(subscription=dead_sub, max_messages=1, timeout=3)
    assert response.received_messages == []


def test_a_dead_letter_whose_alert_cannot_be_published_is_redelivered(env, monkeypatch):
    bus, _, _, _, _ = env
    data = base64.b64encode(b'{"at": "tick"}').decode()
    body = {
        "message": {
            "data": data,
            "messageId": "dl-1",
            "attributes": {dead_letters.ATTR_SUBSCRIPTION: "ticks-trigger"},
        },
        "subscription": "projects/p/subscriptions/dead-letters-trigger",
    }
    # a project without the alerts topic: the publish fails, the function must not ack
    monkeypatch.setenv("PIPELINE_PROJECT", "no-topics-here")
    response = client("on_dead_letter").post(
        "/", headers={"Content-Type": "application/json"}, data=json.dumps(body)
    )
    assert response.status_code == 500


def test_a_dead_letter_that_is_not_a_pubsub_message_is_acknowledged(env):
    headers = {
        "ce-id": "x1",
        "ce-specversion": "1.0",
        "ce-source": "//pubsub.googleapis.com/projects/p/topics/dead-letters",
        "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        "Content-Type": "application/json",
    }
    response = client("on_dead_letter").post("/", headers=headers, data=json.dumps({"x": 1}))
    assert response.status_code == 200
