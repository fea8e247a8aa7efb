"""Cloud Functions through functions-framework, fed real Eventarc Pub/Sub envelopes."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import functions_framework

from adapters.google.firestore_store import FirestoreRunStore
from adapters.local.eventarc import functions_source
from shared.config.config_files import load_config
from shared.reconcile.build_plan import new_run

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"


def client(target: str):
    app = functions_framework.create_app(target, str(functions_source()), "cloudevent")
    return app.test_client()


def envelope(data: bytes, topic: str, attributes: dict | None = None, message_id: str = "m1"):
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    body = {
        "message": {
            "data": base64.b64encode(data).decode(),
            "attributes": attributes or {},
            "messageId": message_id,
            "publishTime": now,
        },
        "subscription": f"projects/p/subscriptions/{topic}-sub",
    }
    headers = {
        "ce-id": message_id,
        "ce-specversion": "1.0",
        "ce-source": f"//pubsub.googleapis.com/projects/p/topics/{topic}",
        "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        "Content-Type": "application/json",
    }
    return headers, json.dumps(body)


def start_run(store: FirestoreRunStore, advance: str = "auto") -> str:
    run = new_run(load_config(DEMO), "r-fn", ["ingest"], advance, datetime.now(UTC))
    run.setups.clear()  # the functions' wiring is tested on layer Jobs (setups: their own tests)
    store.create_run(run)
    return run.run_id


def kick(run_id: str) -> int:
    """An operator's kick for `run_id`, delivered to on_kick; the HTTP status."""
    headers, body = envelope(json.dumps({"run_id": run_id}).encode(), "kick")
    return client("on_kick").post("/", headers=headers, data=body).status_code
