"""terraform/alerts.tf (parsed with python-hcl2): the severities agree with the code and
docs/alerts.md, and every log filter is evaluated against the log lines the controller
writes (tests/fixtures/controller_log_lines.json, captured from a real reconcile and kept
current by tests/contract/test_alert_log.py), with tests/builders/logging_query.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from shared.control.alert_severity import SEVERITIES, Severity
from tests.builders.captured_logs import captured_entries
from tests.builders.logging_query import UnsupportedQueryError, matches
from tests.builders.terraform_hcl import TF, local, one, rendered, resources

ROOT = Path(__file__).resolve().parents[3]


ENTRIES = captured_entries()
POLICIES = resources("google_monitoring_alert_policy")


def alert_entry(kind: str) -> dict[str, Any]:
    [entry] = [e for e in ENTRIES if e["jsonPayload"].get("kind") == kind]
    return entry


def kind_filter() -> str:
    cond = one(one(POLICIES["alert"]["conditions"])["condition_matched_log"])
    return cond["filter"]


def page_filters() -> list[str]:
    """The rendered filters of the policies that page, with the default severities."""
    return [rendered(kind_filter(), k) for k, s in local("alert_severities").items() if s == "page"]


# --- one table --------------------------------------------------------------------------------


def docs_severities() -> dict[str, str]:
    text = (ROOT / "docs" / "alerts.md").read_text()
    section = text.split("## Severities", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", section, flags=re.M)
    return dict(rows)


def test_code_terraform_and_docs_agree_on_severities():
    code = {kind: s.value for kind, s in SEVERITIES.items()}
    assert len(code) >= 15
    assert local("alert_severities") == code
    assert docs_severities() == code


def test_the_severity_levels_are_the_enums():
    assert local("alert_severity_levels") == [s.value for s in Severity]
    assert set(local("monitoring_severity")) == {s.value for s in Severity}


def test_one_policy_per_kind_overridable():
    body = POLICIES["alert"]
    assert body["for_each"] == "${local.effective_alert_severities}"
    effective = local("effective_alert_severities")
    assert effective == "${merge(local.alert_severities, var.alert_severity_overrides)}"
    assert body["notification_channels"] == "${local.alert_channels[each.value]}"


# --- the filters against the captured lines ---------------------------------------------------


def test_the_capture_has_what_the_filters_are_tested_on():
    kinds = {e["jsonPayload"].get("kind") for e in ENTRIES}
    assert {"layer_failed", "approval_needed", "failed_indexes", "message_dead_lettered"} <= kinds
    assert any(e["severity"] == "ERROR" for e in ENTRIES)
    assert any(e["jsonPayload"]["message"] == "ticked" for e in ENTRIES)


def test_a_layer_failed_entry_pages_an_approval_needed_entry_does_not():
    assert any(matches(f, alert_entry("layer_failed")) for f in page_filters())
    assert not any(matches(f, alert_entry("approval_needed")) for f in page_filters())


@pytest.mark.parametrize("kind", ["layer_failed", "approval_needed", "failed_indexes"])
def test_each_kinds_policy_matches_its_entries_only(kind):
    matched = [e for e in ENTRIES if matches(rendered(kind_filter(), kind), e)]
    assert matched == [alert_entry(kind)]


def test_the_dead_letter_alert_is_matched_from_its_own_function():
    entry = alert_entry("message_dead_lettered")
    assert matches(rendered(kind_filter(), "message_dead_lettered"), entry)
    assert not matches(rendered(kind_filter(), "layer_failed"), entry)


def test_function_errors_match_the_controllers_errors_and_no_alert():
    errors = rendered(
        POLICIES["function_errors"]["conditions"][0]["condition_matched_log"][0]["filter"]
    )
    matched = [e["jsonPayload"]["message"] for e in ENTRIES if matches(errors, e)]
    assert matched == ["reconcile failed"]


def test_the_tick_metric_counts_each_tick():
    metric = resources("google_logging_metric")["ticks"]
    matched = [e for e in ENTRIES if matches(rendered(metric["filter"]), e)]
    ticks = [e for e in ENTRIES if e["jsonPayload"]["message"] == "ticked"]
    assert matched == ticks and len(ticks) >= 4


def test_the_functions_filter_names_every_function():
    names = set(re.findall(r'"(on-[a-z-]+)"', rendered(local("function_logs_filter"))))
    trigger = set(local("trigger_functions"))
    dead = set(re.findall(r'"(on-[a-z-]+)"', str(local("functions"))))
    assert names == trigger | dead and "on-dead-letter" in names


@pytest.mark.parametrize(
    ("query", "entry", "want"),
    [
        ('jsonPayload.kind="a"', {"jsonPayload": {"kind": "a"}}, True),
        ('jsonPayload.kind="a"', {"jsonPayload": {"kind": "b"}}, False),
        ('jsonPayload.kind=("a" OR "b")', {"jsonPayload": {"kind": "b"}}, True),
        ('NOT jsonPayload.kind="a"', {"jsonPayload": {"kind": "a"}}, False),
        ("severity>=ERROR", {"severity": "WARNING"}, False),
        ("severity>=ERROR", {"severity": "CRITICAL"}, True),
        ("jsonPayload.layer>=2", {"jsonPayload": {"layer": 3}}, True),
        ('jsonPayload.x="a" jsonPayload.y="b"', {"jsonPayload": {"x": "a", "y": "c"}}, False),
        ('jsonPayload.x="a" OR jsonPayload.y="b"', {"jsonPayload": {"y": "b"}}, True),
        ('jsonPayload.missing!="a"', {"jsonPayload": {}}, True),
    ],
)
def test_the_evaluator(query, entry, want):
    assert matches(query, entry) is want


def test_the_evaluator_refuses_what_it_does_not_know():
    with pytest.raises(UnsupportedQueryError):
        matches('jsonPayload.kind=starts_with("a")', {})


# --- what a notification says and how often ---------------------------------------------------


@pytest.mark.parametrize("name", ["alert", "function_errors", "dead_letter_backlog"])
def test_notifications_are_rate_limited(name):
    strategy = one(POLICIES[name]["alert_strategy"])
    assert one(strategy["notification_rate_limit"])["period"] == "${local.alert_rate_limit}"


def test_every_policy_says_what_happened_and_the_command():
    assert set(POLICIES) == {"alert", "function_errors", "dead_letter_backlog", "tick_silence"}
    for name, body in POLICIES.items():
        doc = one(body["documentation"])
        assert "What happened" in doc["content"] and "What to do" in doc["content"], name
        assert re.search(r"`(pipeline|gcloud) [a-z]", doc["content"]), name
        assert doc["mime_type"] == "text/markdown"
    alert_doc = one(POLICIES["alert"]["documentation"])["content"]
    assert "$${log.extracted_label.fix}" in alert_doc
    assert "pipeline alerts $${log.extracted_label.run}" in alert_doc


def test_the_notification_fields_are_extracted_from_the_entry():
    cond = one(one(POLICIES["alert"]["conditions"])["condition_matched_log"])
    fields = {
        k: re.fullmatch(r"EXTRACT\(jsonPayload\.(\w+)\)", v).group(1)
        for k, v in cond["label_extractors"].items()
    }
    entry = alert_entry("layer_failed")["jsonPayload"]
    assert set(fields.values()) <= set(entry)
    assert {"summary", "fix", "run"} <= set(fields)


def test_email_channels_are_made_from_addresses_only():
    channel = resources("google_monitoring_notification_channel")["email"]
    assert channel["type"] == "email"
    assert channel["for_each"] == "${local.alert_emails}"
    assert "${each.value}" in channel["labels"]["email_address"]


def test_the_alert_variables_validate_severities():
    variables = {k: v for block in TF["variable"] for k, v in block.items()}
    for name in (
        "alert_notification_channels",
        "alert_emails",
        "alert_severity_overrides",
        "controller_alert_severity",
    ):
        condition = one(variables[name]["validation"])["condition"]
        assert all(s.value in condition for s in Severity), name
