"""Dead letters: the alert raised for a message the controller could not process.

Each trigger topic feeds its function through a push subscription named `<topic>-trigger`
(terraform/functions.tf). A message that is delivered `dead_letter_max_attempts` times (10 by
default) without a 2xx answer - the function raised, timed out, or could not start - is
forwarded by Pub/Sub to the `dead-letters` topic, with its data and attributes unchanged and
these attributes added:

    CloudPubSubDeadLetterSourceSubscription         the trigger subscription (short name)
    CloudPubSubDeadLetterSourceSubscriptionProject  its project
    CloudPubSubDeadLetterSourceDeliveryCount        the deliveries made
    CloudPubSubDeadLetterSourceTopicPublishTime     when the message was first published

`on_dead_letter` (functions/main.py) publishes `alert_body(...)` on `alerts` with the attribute
kind = `message_dead_lettered`. Schema of the body (JSON):

    kind                  "message_dead_lettered"
    run_id                the run the message was about when it says so (kick), else null
    at                    when the alert was built (ISO 8601, UTC)
    topic                 the original topic (job-events, ticks, kick), null if unknown
    function              the function that failed on it (on-job-event, ...), null if unknown
    subscription          "<project>/<subscription>" the message was dead-lettered from
    delivery_attempts     deliveries made (int), null if Pub/Sub did not say
    first_published       the original publish time (as Pub/Sub gave it)
    message_id            id of the dead-lettered copy (the dead-letters message)
    error                 what failed, in words, and what to do next
    logs_filter           a Cloud Logging query for the failing function's errors since then
    subject               what the message was about: {run_id} of a kick, {job, reason} of a
                          Job event; {} when the payload says nothing we know
    attributes            the original attributes (Pub/Sub's CloudPubSubDeadLetter* removed)
    payload_bytes         size of the original data
    payload_encoding      "utf-8", or "base64" for data that is not UTF-8 text
    payload_excerpt       at most EXCERPT_BYTES of the data
    payload_truncated     true when the excerpt is shorter than the data

The whole message stays in the `dead-letters-operator` subscription for a week (to read, and
to replay after a fix). Pure module: no I/O, the clock is a parameter.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

DEAD_LETTER_TOPIC = "dead-letters"
ALERT_KIND = "message_dead_lettered"

# The trigger topics and the functions they feed (terraform/functions.tf local.functions).
TRIGGER_FUNCTIONS = {
    "job-events": "on-job-event",
    "ticks": "on-tick",
    "kick": "on-kick",
}
TRIGGER_SUBSCRIPTION_SUFFIX = "-trigger"

# Attributes Pub/Sub adds when it forwards a message to a dead-letter topic.
ATTR_PREFIX = "CloudPubSubDeadLetter"
ATTR_SUBSCRIPTION = "CloudPubSubDeadLetterSourceSubscription"
ATTR_SUBSCRIPTION_PROJECT = "CloudPubSubDeadLetterSourceSubscriptionProject"
ATTR_DELIVERY_COUNT = "CloudPubSubDeadLetterSourceDeliveryCount"
ATTR_PUBLISH_TIME = "CloudPubSubDeadLetterSourceTopicPublishTime"

# The payload excerpt in an alert: enough for a kick or a Job event's LogEntry, small enough
# that an alert stays far below Pub/Sub's 10 MB and a chat message's limits.
EXCERPT_BYTES = 4096


def source_topic(subscription: str) -> str | None:
    """The topic a `<topic>-trigger` subscription reads; None for any other name."""
    name = subscription.rsplit("/", 1)[-1]
    if not name.endswith(TRIGGER_SUBSCRIPTION_SUFFIX):
        return None
    topic = name[: -len(TRIGGER_SUBSCRIPTION_SUFFIX)]
    return topic or None


def payload_excerpt(data: bytes, limit: int = EXCERPT_BYTES) -> tuple[str, str, bool]:
    """`(excerpt, encoding, truncated)`: the first `limit` bytes of `data` as UTF-8 text
    (a character cut by the limit is dropped), or base64 when the data is not UTF-8."""
    head = data[:limit]
    truncated = len(data) > limit
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(head).decode("ascii"), "base64", truncated
    return head.decode("utf-8", errors="ignore"), "utf-8", truncated


def _delivery_count(attributes: dict[str, str]) -> int | None:
    try:
        return int(attributes[ATTR_DELIVERY_COUNT])
    except (KeyError, ValueError):
        return None


def _subject(topic: str | None, data: bytes) -> dict[str, Any]:
    """What the message was about, when the payload says so (never raises)."""
    try:
        body = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(body, dict):
        return {}
    if topic == "kick" and isinstance(body.get("run_id"), str):
        return {"run_id": body["run_id"], "action": body.get("action")}
    if topic == "job-events":
        payload = body.get("jsonPayload")
        involved = payload.get("involvedObject") if isinstance(payload, dict) else None
        if isinstance(involved, dict) and isinstance(involved.get("name"), str):
            return {"job": involved["name"], "reason": payload.get("reason")}
    return {}


def logs_filter(function: str | None, since: str | None) -> str | None:
    """A Cloud Logging query for the errors of `function` since `since` (the first publish)."""
    if function is None:
        return None
    parts = [
        'resource.type="cloud_run_revision"',
        f'resource.labels.service_name="{function}"',
        "severity>=ERROR",
    ]
    if since:
        parts.append(f'timestamp>="{since}"')
    return " AND ".join(parts)


def alert_body(
    data: bytes, attributes: dict[str, str], message_id: str, now: datetime
) -> dict[str, Any]:
    """The `message_dead_lettered` alert for one message of the dead-letters topic."""
    subscription = attributes.get(ATTR_SUBSCRIPTION, "")
    project = attributes.get(ATTR_SUBSCRIPTION_PROJECT, "")
    topic = source_topic(subscription) if subscription else None
    function = TRIGGER_FUNCTIONS.get(topic) if topic else None
    attempts = _delivery_count(attributes)
    first_published = attributes.get(ATTR_PUBLISH_TIME)
    excerpt, encoding, truncated = payload_excerpt(data)
    subject = _subject(topic, data)

    who = function or (f"the subscriber of {subscription}" if subscription else "its subscriber")
    tries = f"{attempts} deliveries" if attempts is not None else "its last delivery"
    error = (
        f"{who} did not acknowledge this {topic or 'unknown-topic'} message after {tries} "
        "(it raised, timed out, or could not start); Pub/Sub stopped retrying it. "
        "Find the error with logs_filter, fix the cause, then replay the message from the "
        "dead-letters-operator subscription if it still matters (ticks need no replay)."
    )
    return {
        "kind": ALERT_KIND,
        "run_id": subject.get("run_id"),
        "at": now.isoformat(),
        "topic": topic,
        "function": function,
        "subscription": f"{project}/{subscription}" if project else subscription or None,
        "delivery_attempts": attempts,
        "first_published": first_published,
        "message_id": message_id,
        "error": error,
        "logs_filter": logs_filter(function, first_published),
        "subject": subject,
        "attributes": {k: v for k, v in attributes.items() if not k.startswith(ATTR_PREFIX)},
        "payload_bytes": len(data),
        "payload_encoding": encoding,
        "payload_excerpt": excerpt,
        "payload_truncated": truncated,
    }


def alert_attributes(body: dict[str, Any]) -> dict[str, str]:
    """Pub/Sub attributes of the alert: `kind` (as every alert), and `source_topic` to filter
    on (e.g. attributes.source_topic = "kick")."""
    attributes = {"kind": ALERT_KIND}
    if body.get("topic"):
        attributes["source_topic"] = str(body["topic"])
    return attributes
