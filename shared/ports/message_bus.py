"""The publishing port of the operator CLI's kicks: a JSON body to a named topic.

Implemented by `adapters.google.pubsub_bus.PubSubBus`. Pure module: a Protocol, no I/O.
"""

from __future__ import annotations

from typing import Any, Protocol


class JsonPublisher(Protocol):
    """Publishes JSON messages to topics by name."""

    def publish_json(self, topic: str, body: dict[str, Any], **attributes: str) -> str:
        """Publish `body` to `topic`; returns the message's id."""
        ...
