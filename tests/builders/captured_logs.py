"""The controller's log lines of a real reconcile scenario, as Cloud Logging would store them:
the source of tests/fixtures/controller_log_lines.json, which the terraform log filters are
tested against (tests/unit/deploy/test_alert_policies.py).

The scenario runs the real controller (triggers, reconciler, outbox) on the Firestore emulator
with the recording cluster: a tick starts run r1's layer 2; one tick fails to read its Job
(`reconcile failed`, an ERROR); its Job reports a failed index (`failed_indexes`), then
fails (`layer_failed`); a tick of run r2 (approve mode) raises `approval_needed`; a dead
letter raises `message_dead_lettered`. The lines are taken from the `cave_pipeline.*`
loggers as the functions write them (one JSON object a line).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.control.triggers import alert_dead_letter
from shared.ports.cluster import ClusterError, JobStatus
from shared.ports.run_store import RunStore
from shared.reconcile.build_plan import new_run
from tests.builders.demo_configs import with_batch
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import DEMO, NOW

# Fields whose values differ from one capture to the next (ids, clocks, byte counts): kept,
# their value written as `<field>` (e.g. "<alert_id>"), so that the committed capture stays
# the same from run to run and a filter may test the field's presence but not its value.
VOLATILE = {"alert_id", "event_id", "elapsed_s", "wall_s", "holder", "since", "step_s"}


class _FailingCluster(RecordingCluster):
    """The recording cluster, refusing to read Jobs while `refusal` is set."""

    refusal: Exception | None = None

    def get_job(self, name: str) -> JobStatus | None:
        if self.refusal is not None:
            raise self.refusal
        return super().get_job(name)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _captured() -> Iterator[list[str]]:
    handler = _Lines()
    root = logging.getLogger("cave_pipeline")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler.lines
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def normalized(line: str) -> dict[str, Any] | None:
    """A log line as a comparable JSON object (volatile values replaced); None: not JSON."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    return {k: (f"<{k}>" if k in VOLATILE else v) for k, v in entry.items()}


def capture(store: RunStore) -> list[dict[str, Any]]:
    """Run the scenario on `store` (an empty emulator project); the lines it logged."""
    cfg = with_batch(load_config(DEMO))  # the captured lines are at 32 chunks a pod
    cluster = _FailingCluster()
    published: list[tuple[str, dict[str, Any]]] = []
    clock = [NOW]
    controller = Controller(
        store, cluster, lambda k, b: published.append((k, b)), clock=lambda: clock[0]
    )

    def tick() -> None:
        clock[0] += timedelta(seconds=60)
        controller.on_tick()

    r1 = new_run(cfg, "r1", ["ingest"], "auto", NOW)
    r1.setups.clear()  # the layers' alerts, not the setup pass's
    with _captured() as lines:
        store.create_run(r1)
        tick()  # starts layer 2
        job = store.load_run("r1").layers["ingest-L2"].job.name
        cluster.refusal = ClusterError("jobs is forbidden: 403")
        tick()  # reconcile failed (an ERROR line)
        cluster.refusal = None
        cluster.finish(job, failed_indexes="1", completed_indexes="0,2-3", active=2)
        tick()  # failed_indexes (and chunks done: the dashboard's metrics)
        cluster.finish(job, condition="Failed", reason="BackoffLimitExceeded", active=0)
        tick()  # layer_failed
        r2 = new_run(cfg, "r2", ["ingest"], "approve", NOW)
        r2.setups.clear()
        store.create_run(r2)
        tick()  # approval_needed
        alert_dead_letter(
            lambda topic, body, **attributes: None,
            json.dumps({"run_id": "r2", "action": "resume", "by": "alice"}).encode(),
            {
                "CloudPubSubDeadLetterSourceSubscription": "kick-trigger",
                "CloudPubSubDeadLetterSourceDeliveryCount": "10",
            },
            "m-1",
            clock[0],
        )
    return [e for line in lines if (e := normalized(line)) is not None]


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "controller_log_lines.json"


def log_entry(line: dict[str, Any]) -> dict[str, Any]:
    """A controller line as Cloud Logging stores it from a Cloud Run service's stdout: the
    JSON line's `severity` becomes the entry's, the rest is jsonPayload (message included).
    The service is the function that logs it: on-dead-letter for a dead letter's alert,
    on-tick for the scenario's ticks."""
    payload = {k: v for k, v in line.items() if k != "severity"}
    service = "on-dead-letter" if line.get("kind") == "message_dead_lettered" else "on-tick"
    return {
        "severity": line["severity"],
        "jsonPayload": payload,
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": service}},
        "logName": "projects/p/logs/run.googleapis.com%2Fstdout",
    }


def captured_entries() -> list[dict[str, Any]]:
    """The committed capture (FIXTURE) as Cloud Logging's entries."""
    return [log_entry(line) for line in json.loads(FIXTURE.read_text())["lines"]]
