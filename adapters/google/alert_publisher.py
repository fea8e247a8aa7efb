"""Alert publishing on Pub/Sub: the `alerts` topic, the body as JSON with `kind` and
`alert_id` attributes (subscribers filter on them)."""

from __future__ import annotations

from typing import Any

from adapters.google.pubsub_bus import PubSubBus

ALERTS_TOPIC = "alerts"


class PubSubAlertPublisher:
    """AlertPublisher on a project's Pub/Sub `alerts` topic."""

    def __init__(self, bus: PubSubBus, topic: str = ALERTS_TOPIC) -> None:
        self.bus, self.topic = bus, topic

    def __call__(self, kind: str, body: dict[str, Any]) -> None:
        alert_id = str(body.get("alert_id", ""))
        self.bus.publish_json(self.topic, body, kind=kind, alert_id=alert_id)
