"""Local stand-in for Eventarc: delivers Pub/Sub messages to the functions as CloudEvents.

Each subscription's messages are pulled from the Pub/Sub emulator and POSTed, as Eventarc
does, to a functions-framework app built from `functions/main.py` (binary-mode CloudEvent,
type `google.cloud.pubsub.topic.v1.messagePublished`). A 2xx response acks the message;
anything else nacks it so Pub/Sub redelivers, exactly the at-least-once contract the
functions are written for. As in production (each function deployed with max_instances 1 and
concurrency 1), each function handles one message at a time, and the three functions run
in parallel with each other: a kick may be reconciled while a tick is still running.
`max_instances` > 1 lets that many deliveries of one function run at once (terraform's
`max_instances`, or Cloud Run briefly exceeding it). The body carries the message's
`publishTime`, as Eventarc's does: the tick function measures its lateness by it.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import functions_framework
from google.cloud import pubsub_v1

log = logging.getLogger("cave_pipeline.dispatch")
PUBSUB_EVENT_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"


# The functions are a file the runtime loads (stage_functions.sh ships it as main.py), not a
# package `shared` imports: the stand-in finds it beside `shared`, where a checkout or an
# install of this project has it (PIPELINE_FUNCTIONS_SOURCE overrides).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_SOURCE_ENV = "PIPELINE_FUNCTIONS_SOURCE"


def functions_source() -> Path:
    """Path of the functions' source, `functions/main.py`."""
    path = Path(os.environ.get(FUNCTIONS_SOURCE_ENV) or PROJECT_ROOT / "functions" / "main.py")
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: the functions' source is not there; reinstall this project "
            f"(pip install -e .) or set {FUNCTIONS_SOURCE_ENV} to functions/main.py"
        )
    return path


def cloud_event_request(
    project: str, topic: str, subscription: str, message: pubsub_v1.subscriber.message.Message
) -> tuple[dict[str, str], bytes]:
    """Headers and body of the HTTP request Eventarc sends for one Pub/Sub message."""
    publish_time = message.publish_time.isoformat().replace("+00:00", "Z")
    body = {
        "message": {
            "data": base64.b64encode(message.data).decode(),
            "attributes": dict(message.attributes),
            "messageId": message.message_id,
            "message_id": message.message_id,
            "publishTime": publish_time,
            "publish_time": publish_time,
        },
        "subscription": f"projects/{project}/subscriptions/{subscription}",
    }
    headers = {
        "ce-id": message.message_id,
        "ce-specversion": "1.0",
        "ce-source": f"//pubsub.googleapis.com/projects/{project}/topics/{topic}",
        "ce-type": PUBSUB_EVENT_TYPE,
        "ce-time": publish_time,
        "Content-Type": "application/json",
    }
    return headers, json.dumps(body).encode()


class Dispatcher:
    """Streams each subscription to one function target of `functions/main.py`."""

    def __init__(
        self,
        project: str,
        routes: dict[str, tuple[str, str]],
        clients: dict[str, Any] | None = None,
        max_instances: int = 1,
    ) -> None:
        """`routes`: subscription name -> (topic, function target). `clients`: target ->
        an object with `post(path, headers=, data=)` returning a response with
        `status_code`; by default functions-framework test clients of `functions/main.py`.
        `max_instances`: deliveries of one function that may run at once."""
        self.project, self.routes = project, routes
        self.subscriber = pubsub_v1.SubscriberClient()
        if clients is None:
            source = str(functions_source())
            clients = {
                target: functions_framework.create_app(target, source, "cloudevent").test_client()
                for _, target in routes.values()
            }
        self.clients = clients
        # max_instances in flight per function (concurrency 1 each), functions in parallel
        self.max_instances = max_instances
        self._in_flight = {
            target: threading.BoundedSemaphore(max_instances) for _, target in routes.values()
        }
        self._futures: list[Any] = []
        self._stopping = threading.Event()
        # Chaos (adapters.local.chaos): called with (subscription, message, deliver);
        # True means it took the message over (duplicated, delayed, held back or dropped).
        self.fault_hook: Callable[[str, Any, Callable[[], None]], bool] | None = None

    def start(self) -> Dispatcher:
        flow = pubsub_v1.types.FlowControl(max_messages=10)
        for sub, (topic, target) in self.routes.items():
            path = self.subscriber.subscription_path(self.project, sub)
            callback = self._callback(topic, sub, target)
            self._futures.append(self.subscriber.subscribe(path, callback, flow_control=flow))
        return self

    def _callback(self, topic: str, sub: str, target: str) -> Callable[[Any], None]:
        def deliver(message: pubsub_v1.subscriber.message.Message) -> None:
            hook = self.fault_hook
            if hook is not None and hook(sub, message, lambda: post(message)):
                return
            post(message)

        def post(message: pubsub_v1.subscriber.message.Message) -> None:
            headers, body = cloud_event_request(self.project, topic, sub, message)
            with self._in_flight[target]:
                if self._stopping.is_set():
                    # Queued behind a delivery while the stack stops: the emulators are
                    # going away, so calling the function would only retry into the void.
                    message.nack()
                    return
                try:
                    status = self.clients[target].post("/", headers=headers, data=body).status_code
                except Exception as e:  # the app itself crashed: redeliver
                    log.warning("%s -> %s crashed: %r", sub, target, e)
                    status = 599
            if 200 <= status < 300:
                message.ack()
            else:
                log.warning("%s -> %s answered %s; nacked for redelivery", sub, target, status)
                message.nack()

        return deliver

    def stop(self, in_flight_wait_s: float = 30.0) -> None:
        """Stop pulling; deliveries still queued are nacked, not run. A delivery in flight is
        waited for (up to `in_flight_wait_s` per function), so the emulators are not stopped
        under it: a function cut off mid-call retries against them for minutes."""
        self._stopping.set()
        for slots in self._in_flight.values():
            taken = sum(slots.acquire(timeout=in_flight_wait_s) for _ in range(self.max_instances))
            for _ in range(taken):
                slots.release()
        for future in self._futures:
            future.cancel()
        for future in self._futures:
            try:
                future.result(timeout=5)
            except Exception:  # cancelled futures raise; that is the normal end
                pass
        self.subscriber.close()
