"""The alert publishing port: how the controller hands an alert (its outbox entry, once
committed) to the operators' channel. Pure module; the adapter is
`adapters.google.alert_publisher.PubSubAlertPublisher` (docs/ports-and-wiring.md).
"""

from __future__ import annotations

from typing import Any, Protocol


class AlertPublisher(Protocol):
    """Publish one alert: `kind` (shared.control.alerts) and its JSON body. Raises if it was not
    published (the outbox entry stays unsent and the next flush retries it)."""

    def __call__(self, kind: str, body: dict[str, Any]) -> None: ...
