"""`pipeline alerts`' lines (shared.control.alert_lines) and its follow loop: order, kinds,
undecided claim_lost checks, each alert listed once, and the end of the run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scripts.commands.alerts import alert_text, follow
from shared.control.alert_lines import alert_lines, unseen
from shared.control.alert_severity import Severity
from shared.ports.run_store import StoredAlert

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stored(alert_id: str, kind: str, minute: int, sent: bool = True, **body) -> StoredAlert:
    full = {"kind": kind, "run_id": "r1", "stage": "ingest", "layer": 2, **body}
    return StoredAlert(alert_id, kind, full, T0 + timedelta(minutes=minute), sent)


OUTBOX = [
    stored("c", "approval_needed", 3, layer=3),
    stored("a", "failed_indexes", 1, index_count=1, indexes="4"),
    stored("b", "layer_failed", 2, reason="BackoffLimitExceeded"),
    stored("d", "claim_lost", 4, sent=False, candidates=[{"pod": "p-1"}]),  # a check
    stored("e", "budget_reached", 5, sent=False, stage="", layer=0, spend_usd=3, budget_usd=2),
]


@pytest.mark.parametrize(
    ("kinds", "want"),
    [
        (frozenset(), ["a", "b", "c", "e"]),  # newest last; the undecided check left out
        (frozenset({"layer_failed"}), ["b"]),
        (frozenset({"layer_failed", "approval_needed"}), ["b", "c"]),
        (frozenset({"run_finished"}), []),
    ],
)
def test_lines_newest_last_of_the_kinds_asked(kinds, want):
    assert [line.alert_id for line in alert_lines(OUTBOX, kinds)] == want


def test_a_line_has_its_severity_summary_and_fix():
    by_id = {line.alert_id: line for line in alert_lines(OUTBOX)}
    failed = by_id["b"]
    assert failed.severity is Severity.PAGE
    assert failed.summary == "layer_failed run r1 ingest layer 2: BackoffLimitExceeded"
    assert failed.fix == "pipeline inspect r1 ingest 2"
    assert by_id["c"].fix == "pipeline approve r1 ingest 3" and by_id["c"].layer == 3
    assert by_id["e"].sent is False and by_id["e"].as_json()["severity"] == "notify"
    text = alert_text(failed).plain
    assert text.startswith("01-01 00:02:00  page ") and text.endswith(
        "->  pipeline inspect r1 ingest 2"
    )
    assert "(not yet published)" in alert_text(by_id["e"]).plain


def test_unseen_lists_each_alert_once():
    seen: set[str] = set()
    lines = alert_lines(OUTBOX)
    assert [a.alert_id for a in unseen(lines[:2], seen)] == ["a", "b"]
    assert [a.alert_id for a in unseen(lines, seen)] == ["c", "e"]
    assert unseen(lines, seen) == []


def test_follow_shows_new_alerts_until_the_run_ends_and_reads_once_more():
    """Polls: the run ends on the third; the alert committed with the end is still shown."""
    outbox: list[StoredAlert] = [OUTBOX[1]]
    polls = iter([False, False, True])
    shown: list[str] = []
    sleeps: list[float] = []

    def ended() -> bool:
        over = next(polls)
        if over:
            outbox.append(stored("z", "run_finished", 9, stage="", layer=0, status="succeeded"))
        return over

    def sleep(s: float) -> None:
        sleeps.append(s)
        outbox.append(OUTBOX[2]) if len(sleeps) == 1 else None

    n = follow(lambda: alert_lines(outbox), ended, lambda a: shown.append(a.alert_id), 2.0, sleep)
    assert shown == ["a", "b", "z"] and n == 3
    assert sleeps == [2.0, 2.0]
