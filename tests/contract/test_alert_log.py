"""The controller's log entry of a published alert, on the Firestore emulator: one entry per
alert the outbox publishes (none for a publish that failed), and the captured lines the
terraform log filters are tested against (tests/fixtures/controller_log_lines.json) are the
lines the real code writes today.

Regenerate the fixture after a deliberate change of the controller's log lines:

    CAVE_REWRITE_CAPTURED_LOGS=1 python3 -m pytest -q tests/contract/test_alert_log.py
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import pytest

from shared.control.controller import Controller
from tests.builders.captured_logs import FIXTURE, capture, normalized
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import NOW

HOW = (
    "Captured by tests/builders/captured_logs.py (capture): the real controller on the "
    "Firestore emulator with the recording cluster; volatile values replaced by <field>. "
    "Regenerate: CAVE_REWRITE_CAPTURED_LOGS=1 pytest tests/contract/test_alert_log.py"
)


def _alert_entries(caplog) -> list[dict[str, Any]]:
    return [
        e
        for r in caplog.records
        if r.name == "cave_pipeline.outbox"
        and (e := normalized(r.getMessage()))
        and e["message"] == "alert published"
    ]


def _failed_layer(store, cluster) -> None:
    """Start r1's layer 2, then let its Job fail with index 1 failed."""
    Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconcile("r1")
    job = store.load_run("r1").layers["ingest-L2"].job.name
    cluster.finish(job, failed_indexes="1", condition="Failed", reason="BackoffLimitExceeded")


def test_one_entry_per_published_alert(store, run, caplog):
    caplog.set_level(logging.INFO, logger="cave_pipeline")
    cluster = RecordingCluster()
    _failed_layer(store, cluster)
    published: list[tuple[str, dict[str, Any]]] = []
    Controller(store, cluster, lambda k, b: published.append((k, b)), clock=lambda: NOW).reconcile(
        "r1"
    )
    entries = _alert_entries(caplog)
    assert [e["kind"] for e in entries] == [k for k, _ in published]
    assert sorted(k for k, _ in published) == ["failed_indexes", "layer_failed"]
    [failed] = [e for e in entries if e["kind"] == "layer_failed"]
    assert failed == {
        "severity": "WARNING",
        "message": "alert published",
        "kind": "layer_failed",
        "alert_severity": "page",
        "run": "r1",
        "stage": "ingest",
        "layer": 2,
        "summary": "layer_failed run r1 ingest layer 2: BackoffLimitExceeded",
        "fix": "pipeline inspect r1 ingest 2",
        "alert_id": "<alert_id>",
    }
    # The entry names the outbox id the subscribers dedupe on.
    raw = [
        json.loads(r.getMessage()) for r in caplog.records if "alert published" in r.getMessage()
    ]
    assert {e["alert_id"] for e in raw} == {b["alert_id"] for _, b in published}


def test_a_failed_publish_logs_no_entry(store, run, caplog):
    """The entry says the alert left: a publish that raised is given back, not logged."""
    caplog.set_level(logging.INFO, logger="cave_pipeline")
    cluster = RecordingCluster()
    _failed_layer(store, cluster)

    def down(kind: str, body: dict[str, Any]) -> None:
        raise ConnectionError("pubsub unreachable")

    with pytest.raises(ConnectionError):
        Controller(store, cluster, down, clock=lambda: NOW).reconcile("r1")
    assert _alert_entries(caplog) == []
    assert store.unsent_alerts("r1")  # given back: the next publish sends and logs it


def test_the_captured_lines_are_what_the_controller_writes(store):
    lines = capture(store)
    if os.environ.get("CAVE_REWRITE_CAPTURED_LOGS"):
        FIXTURE.write_text(json.dumps({"how": HOW, "lines": lines}, indent=1) + "\n")
    stored = json.loads(FIXTURE.read_text())
    assert stored["how"] == HOW
    assert stored["lines"] == lines, "the controller's log lines changed: regenerate (see top)"
