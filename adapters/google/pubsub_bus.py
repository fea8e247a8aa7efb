"""Pub/Sub adapter: topics, subscriptions and publishing (real service or its emulator).

Topic schemas (owned here, as the transport): `job-events` carries a Cloud Logging LogEntry
as JSON (see shared.control.job_events); `ticks` carries `{"at": iso-time}`; `kick` carries
`{"run_id": ..., "action": start|approve|pause|resume|scale|submit, "by": ...}`; `alerts`
carries the alert body as JSON with a `kind` attribute (see shared.control.alerts).
"""

from __future__ import annotations

import json
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import pubsub_v1

TOPICS = ("job-events", "ticks", "kick", "alerts")


class PubSubBus:
    """Publish to and manage the pipeline's topics in one project."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.publisher = pubsub_v1.PublisherClient()
        self.subscriber = pubsub_v1.SubscriberClient()

    def topic_path(self, topic: str) -> str:
        return self.publisher.topic_path(self.project, topic)

    def subscription_path(self, name: str) -> str:
        return self.subscriber.subscription_path(self.project, name)

    def ensure_topic(self, topic: str) -> None:
        try:
            self.publisher.create_topic(name=self.topic_path(topic))
        except gexc.AlreadyExists:
            pass

    def ensure_subscription(
        self,
        topic: str,
        name: str,
        ack_deadline_s: int = 60,
        retry_backoff_s: tuple[int, int] | None = None,
    ) -> str:
        """Create the subscription unless it exists; `retry_backoff_s` (minimum, maximum) is
        its retry policy: a nacked message comes back after an exponential backoff between
        the two instead of at once."""
        path = self.subscription_path(name)
        request: dict[str, Any] = {
            "name": path,
            "topic": self.topic_path(topic),
            "ack_deadline_seconds": ack_deadline_s,
        }
        if retry_backoff_s is not None:
            low, high = retry_backoff_s
            request["retry_policy"] = {
                "minimum_backoff": {"seconds": low},
                "maximum_backoff": {"seconds": high},
            }
        try:
            self.subscriber.create_subscription(request=request)
        except gexc.AlreadyExists:
            pass
        return path

    def publish(
        self, topic: str, data: bytes, *, timeout_s: float = 30.0, **attributes: str
    ) -> str:
        """Publish and wait for the message id (so a failure surfaces here, not later), at
        most `timeout_s` (TimeoutError after: the message may still go out)."""
        future = self.publisher.publish(self.topic_path(topic), data, **attributes)
        return future.result(timeout=timeout_s)

    def publish_json(
        self, topic: str, body: dict[str, Any], *, timeout_s: float = 30.0, **attributes: str
    ) -> str:
        data = json.dumps(body, default=str).encode()
        return self.publish(topic, data, timeout_s=timeout_s, **attributes)

    def close(self) -> None:
        self.publisher.stop()
        self.subscriber.close()
