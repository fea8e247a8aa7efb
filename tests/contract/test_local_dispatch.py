"""The local Eventarc stand-in delivers like production: one message at a time per function
(max_instances = 1, concurrency 1), the functions in parallel with each other."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from adapters.google.pubsub_bus import PubSubBus
from adapters.local.eventarc import Dispatcher

HOLD_S = 0.8


@dataclass
class Response:
    status_code: int


class SlowFunction:
    """Records when each delivery ran; holds each for HOLD_S."""

    def __init__(self, name: str, spans: list[tuple[str, float, float]], lock: threading.Lock):
        self.name, self.spans, self.lock = name, spans, lock

    def post(self, path: str, headers: dict[str, str], data: bytes) -> Response:
        start = time.monotonic()
        time.sleep(HOLD_S)
        with self.lock:
            self.spans.append((self.name, start, time.monotonic()))
        return Response(204)


def overlaps(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_one_in_flight_per_function_and_functions_in_parallel(pubsub_project: str) -> None:
    routes = {"a-fn": ("topic-a", "fn_a"), "b-fn": ("topic-b", "fn_b")}
    bus = PubSubBus(pubsub_project)
    for sub, (topic, _) in routes.items():
        bus.ensure_topic(topic)
        bus.ensure_subscription(topic, sub)
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()
    clients: dict[str, Any] = {t: SlowFunction(t, spans, lock) for _, t in routes.values()}
    dispatcher = Dispatcher(pubsub_project, routes, clients).start()
    try:
        for i in range(3):
            bus.publish_json("topic-a", {"i": i})
            bus.publish_json("topic-b", {"i": i})
        deadline = time.monotonic() + 60
        while len(spans) < 6:
            assert time.monotonic() < deadline, f"only {len(spans)} of 6 deliveries: {spans}"
            time.sleep(0.05)
    finally:
        dispatcher.stop()
        bus.close()
    for name in ("fn_a", "fn_b"):
        mine = [s for s in spans if s[0] == name]
        assert len(mine) == 3
        assert not any(overlaps(x, y) for x in mine for y in mine if x is not y), mine
    a = [s for s in spans if s[0] == "fn_a"]
    b = [s for s in spans if s[0] == "fn_b"]
    assert any(overlaps(x, y) for x in a for y in b), "the two functions never ran at once"
