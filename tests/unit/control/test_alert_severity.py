"""Alert severities (shared.control.alert_severity): every kind the code raises has one, the
issue's named kinds have theirs, and the log entry of a published alert carries what a
notification needs (summary, fix) under fields that do not clash with Cloud Logging's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shared.control.alert_severity import (
    DEFAULT_FIXES,
    LOG_LEVELS,
    SEVERITIES,
    Severity,
    UnknownAlertKindError,
    alert_log_entry,
    severity_of,
)

SHARED = Path(__file__).resolve().parents[3] / "shared"


def raised_kinds() -> set[str]:
    """The alert kinds the code raises, read from its source: `Alert("kind", ...)`, the
    `ALERT_KIND = "..."` constants, the bodies built with `"kind": "..."` in
    shared/control/alerts.py, and a canary's ("alert", ("kind", ...)) steps."""
    kinds: set[str] = set()
    for path in SHARED.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Alert":
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    kinds.add(first.value)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [getattr(t, "id", "") for t in node.targets]
                if "ALERT_KIND" in names:
                    kinds.add(node.value.value)
            if isinstance(node, ast.Tuple) and len(node.elts) == 2:
                head, rest = node.elts
                if isinstance(head, ast.Constant) and head.value == "alert":
                    if isinstance(rest, ast.Tuple) and isinstance(rest.elts[0], ast.Constant):
                        kinds.add(rest.elts[0].value)
    alerts_py = (SHARED / "control" / "alerts.py").read_text()
    for node in ast.walk(ast.parse(alerts_py)):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "kind":
                    if isinstance(v, ast.Constant):
                        kinds.add(v.value)
    kinds.add("claim_lost")  # CLAIM_LOST_EVENT, the kind of a completed claim_lost check
    return kinds


def test_every_raised_kind_has_a_severity_and_a_fix():
    raised = raised_kinds()
    assert {"layer_failed", "failed_indexes", "canary_failed", "message_dead_lettered"} <= raised
    assert raised == set(SEVERITIES)
    assert set(DEFAULT_FIXES) == set(SEVERITIES)


@pytest.mark.parametrize(
    ("kind", "severity"),
    [
        ("layer_failed", Severity.PAGE),
        ("setup_failed", Severity.PAGE),
        ("run_unhealthy", Severity.PAGE),
        ("message_dead_lettered", Severity.PAGE),
        ("layer_incomplete", Severity.PAGE),
        ("failed_indexes", Severity.NOTIFY),
        ("oom_killed", Severity.NOTIFY),
        ("pod_hung", Severity.NOTIFY),
        ("index_evicted_repeatedly", Severity.NOTIFY),
        ("budget_reached", Severity.NOTIFY),
        ("layer_stalled", Severity.NOTIFY),
        ("approval_needed", Severity.INFORM),
        ("run_finished", Severity.INFORM),
    ],
)
def test_the_issues_severities(kind, severity):
    assert severity_of(kind) is severity


def test_an_unknown_kind_says_where_to_add_it():
    with pytest.raises(UnknownAlertKindError, match="alert_severity.py"):
        severity_of("made_up")


def test_alert_log_levels_stay_below_error():
    """The function-errors policy matches severity>=ERROR: an alert must not trip it."""
    assert set(LOG_LEVELS.values()) <= {"DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING"}


@pytest.mark.parametrize(
    ("kind", "body", "want"),
    [
        (
            "layer_failed",
            {"run_id": "r1", "stage": "ingest", "layer": 3, "reason": "BackoffLimitExceeded"},
            {
                "alert_severity": "page",
                "run": "r1",
                "stage": "ingest",
                "layer": 3,
                "summary": "layer_failed run r1 ingest layer 3: BackoffLimitExceeded",
                "fix": "pipeline inspect r1 ingest 3",
            },
        ),
        (  # the decision's own fix wins over the default
            "setup_failed",
            {"run_id": "r1", "stage": "ingest", "layer": 0, "reason": "x", "fix": "do {this}"},
            {"alert_severity": "page", "fix": "do {this}"},
        ),
        (
            "approval_needed",
            {"run_id": "r2", "stage": "ingest", "layer": 4},
            {"alert_severity": "inform", "fix": "pipeline approve r2 ingest 4"},
        ),
        (  # run-wide: no stage in the summary; a missing field reads "?"
            "budget_reached",
            {"run_id": "r1", "stage": "", "layer": 0, "spend_usd": 2.5},
            {
                "summary": "budget_reached run r1: spend $2.5 reached the budget $?; "
                "the run is paused"
            },
        ),
        (  # a dead letter may name no run
            "message_dead_lettered",
            {"run_id": None, "topic": "kick", "delivery_attempts": 10},
            {
                "run": "",
                "summary": "message_dead_lettered: a kick message was not delivered after 10 tries",
            },
        ),
    ],
)
def test_alert_log_entry(kind, body, want):
    entry = alert_log_entry(kind, body)
    assert entry.fields["kind"] == kind
    assert "severity" not in entry.fields  # Cloud Logging's level, set from entry.level
    assert {k: entry.fields[k] for k in want} == want
    assert entry.level == LOG_LEVELS[Severity(entry.fields["alert_severity"])]
