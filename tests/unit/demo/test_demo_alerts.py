"""`pipeline demo --chaos` lists the chaos run's alerts at the end: its on_finish keeps the
alerts of the last run to finish (the chaos run, after its baseline), then reports."""

from __future__ import annotations

from datetime import UTC, datetime

from scripts.commands.demo import _alerts_kept
from shared.ports.run_store import StoredAlert

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Run:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id


class Store:
    """Hand-written stand-in: each run's outbox, as `all_alerts` returns it."""

    def __init__(self) -> None:
        body = {"run_id": "chaos", "stage": "ingest", "layer": 2, "reason": "x"}
        self.outboxes = {
            "baseline": [],
            "chaos": [
                StoredAlert("a1", "layer_failed", {"kind": "layer_failed", **body}, T0, True)
            ],
        }

    def all_alerts(self, run_id: str) -> list[StoredAlert]:
        return self.outboxes[run_id]


def test_the_last_run_to_finish_wins_and_the_reporter_still_runs():
    kept: list = []
    reported: list[str] = []
    finish = _alerts_kept(kept, lambda store, run: reported.append(run.run_id))
    store = Store()
    finish(store, Run("baseline"))
    finish(store, Run("chaos"))
    assert [line.kind for line in kept] == ["layer_failed"]
    assert kept[0].fix == "pipeline inspect chaos ingest 2"
    assert reported == ["baseline", "chaos"]


def test_without_a_reporter():
    kept: list = []
    _alerts_kept(kept, None)(Store(), Run("chaos"))
    assert len(kept) == 1
