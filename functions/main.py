"""Cloud Functions entry points (functions-framework, Eventarc Pub/Sub CloudEvents).

Thin: decode the Pub/Sub message (and the settings in the environment), call the
controller's trigger (shared.control.triggers, docs/controller.md). Permanent errors (a malformed
message, an unknown run) are logged and acknowledged by returning normally; anything else
raises, so Pub/Sub redelivers the message.

Each is fed by a push subscription of its topic (terraform/functions.tf): `on_job_event`
(job-events), `on_tick` (ticks), `on_kick` (kick), and `on_dead_letter` (dead-letters: the
messages the others failed on, turned into a `message_dead_lettered` alert).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

import functions_framework
from cloudevents.http import CloudEvent

from adapters.wiring import alerts_bus, controller
from shared.control.advance_watch import WatchPolicy
from shared.control.job_events import BadEventError, parse_log_entry
from shared.control.triggers import alert_dead_letter
from shared.ports.run_store import RunNotFoundError

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
log = logging.getLogger("cave_pipeline.functions")
EVENT_MAX_AGE_S = float(os.environ.get("PIPELINE_EVENT_MAX_AGE_S", "3600"))


class BadMessageError(ValueError):
    """The CloudEvent does not carry a Pub/Sub message we understand (permanent)."""


def _log(severity: str, message: str, **fields: Any) -> None:
    log.info(json.dumps({"severity": severity, "message": message, **fields}, default=str))


def pubsub_message(cloud_event: CloudEvent) -> tuple[bytes, dict[str, str]]:
    """Data and attributes of the Pub/Sub message inside an Eventarc CloudEvent."""
    data = cloud_event.data if isinstance(cloud_event.data, dict) else None
    message = (data or {}).get("message")
    if not isinstance(message, dict):
        raise BadMessageError("CloudEvent data has no Pub/Sub `message` object")
    try:
        payload = base64.b64decode(message.get("data") or b"", validate=True)
    except (ValueError, TypeError) as e:
        raise BadMessageError(f"Pub/Sub message data is not base64: {e}") from None
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise BadMessageError("Pub/Sub message `attributes` is not an object")
    return payload, {str(k): str(v) for k, v in attributes.items()}


def publish_time(cloud_event: CloudEvent) -> datetime | None:
    """When Pub/Sub accepted the message: its `publishTime` (Eventarc's envelope and
    functions-framework's conversion of a push body both carry it in `message`; snake_case
    in some envelopes), else the CloudEvent's `time`, which functions-framework sets from
    it. None if neither is a timestamp."""
    data = cloud_event.data if isinstance(cloud_event.data, dict) else {}
    message = data.get("message") if isinstance(data.get("message"), dict) else {}
    for value in (message.get("publishTime"), message.get("publish_time"), cloud_event.get("time")):
        if not value:
            continue
        try:
            stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            continue
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp
    return None


def kick_message(payload: bytes) -> tuple[str, str | None]:
    """The run id and the action (for the log) of a kick message `{"run_id", "action"}`."""
    try:
        body = json.loads(payload or b"{}")
    except ValueError as e:
        raise BadMessageError(f"message is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadMessageError("message is not a JSON object")
    run_id = body.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise BadMessageError("kick message needs a string `run_id`")
    action = body.get("action")
    return run_id, None if action is None else str(action)


def _now() -> datetime:
    return datetime.now(UTC)


def _permanent(kind: str, cloud_event: CloudEvent, err: Exception) -> None:
    _log("ERROR", f"{kind}: message dropped", reason=str(err), event_id=cloud_event["id"])


@functions_framework.cloud_event
def on_job_event(cloud_event: CloudEvent) -> None:
    """A Kubernetes Job event from the log sink: reconcile the run that owns the Job."""
    try:
        controller().on_job_event(parse_log_entry(pubsub_message(cloud_event)[0]), EVENT_MAX_AGE_S)
    except (BadMessageError, BadEventError, RunNotFoundError) as e:
        _permanent("on_job_event", cloud_event, e)


@functions_framework.cloud_event
def on_tick(cloud_event: CloudEvent) -> None:
    """The heartbeat (Cloud Scheduler, every minute): reconcile every active run, then
    watch the layers about to finish for what is left of the tick's budget, counted from its
    publish time (a late or redelivered tick reconciles but does not watch)."""
    controller().tick(publish_time(cloud_event), cloud_event["id"], watch_policy(), tick_period_s())


def tick_period_s() -> float:
    """Cloud Scheduler's period (`PIPELINE_TICK_PERIOD_S`, 60 s as terraform's job)."""
    return float(os.environ.get("PIPELINE_TICK_PERIOD_S", "60"))


def watch_policy() -> WatchPolicy:
    """From the tick period; `PIPELINE_WATCH_BUDGET_S` overrides the budget (0 turns the
    watch off; a budget set by hand has no hand-offs after it, which could run into the next
    tick) and `PIPELINE_WATCH_POLL_S` the time between Job GETs."""
    poll = float(os.environ.get("PIPELINE_WATCH_POLL_S", "1"))
    policy = WatchPolicy.for_tick_period(tick_period_s(), poll)
    budget = os.environ.get("PIPELINE_WATCH_BUDGET_S")
    return policy if budget is None else WatchPolicy(policy.poll_s, float(budget), policy.horizon_s)


@functions_framework.cloud_event
def on_kick(cloud_event: CloudEvent) -> None:
    """An operator action (start, approve, pause, resume, scale, submit): reconcile the run.

    The action itself is already recorded in Firestore by the CLI; the kick only makes the
    controller look now instead of at the next tick.
    """
    try:
        controller().on_kick(*kick_message(pubsub_message(cloud_event)[0]))
    except (BadMessageError, RunNotFoundError) as e:
        _permanent("on_kick", cloud_event, e)


@functions_framework.cloud_event
def on_dead_letter(cloud_event: CloudEvent) -> None:
    """A message a trigger failed on `dead_letter_max_attempts` times: alert the operators.

    The alert (shared.control.dead_letters) names the original topic and function, the deliveries
    made, where to find the error, and an excerpt of the payload. A publish failure raises,
    so the dead letter is redelivered; the raw message is also kept in dead-letters-operator.
    """
    try:
        payload, attributes = pubsub_message(cloud_event)
    except BadMessageError as e:
        return _permanent("on_dead_letter", cloud_event, e)
    alert_dead_letter(alerts_bus().publish_json, payload, attributes, cloud_event["id"], _now())
