"""The build dashboard (terraform/dashboard.tf, terraform/dashboard.json): its JSON against the
Monitoring API's published Dashboard schema (the v1 discovery document google-api-python-client
ships), its widgets against the log-based metrics terraform defines, and each metric's filter
and extractors against the controller's captured log lines (tests/fixtures/...)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from tests.builders.captured_logs import captured_entries
from tests.builders.discovery import discovery_document, schema_problems
from tests.builders.logging_query import matches
from tests.builders.terraform_hcl import TERRAFORM, local, one, rendered, resources

DASHBOARD = json.loads((TERRAFORM / "dashboard.json").read_text())
ENTRIES = captured_entries()
USER = "logging.googleapis.com/user/"


def discovery() -> dict[str, Any]:
    """monitoring.v1.json from google-api-python-client (the dev extra), or the file
    CAVE_MONITORING_DISCOVERY names."""
    return discovery_document("monitoring.v1.json", os.environ.get("CAVE_MONITORING_DISCOVERY"))


def test_the_dashboard_json_is_a_dashboard_of_the_monitoring_api():
    doc = discovery()
    assert doc["name"] == "monitoring" and doc["version"] == "v1"
    assert schema_problems(DASHBOARD, {"$ref": "Dashboard"}, doc["schemas"], "dashboard") == []


@pytest.mark.parametrize(
    ("broken", "problem"),
    [
        (
            {"mosaicLayout": {"tiles": [{"widget": {"xyChart": {"dataSet": []}}}]}},
            "'dataSet' is not a property",
        ),
        ({"mosaicLayout": {"tiles": [{"width": "wide"}]}}, "an integer expected"),
        (
            {
                "mosaicLayout": {
                    "tiles": [{"widget": {"xyChart": {"dataSets": [{"plotType": "PIE"}]}}}]
                }
            },
            "is none of",
        ),
    ],
)
def test_the_schema_walker_finds_what_is_wrong(broken, problem):
    doc = discovery()
    problems = schema_problems(broken, {"$ref": "Dashboard"}, doc["schemas"], "dashboard")
    assert any(problem in p for p in problems), problems


# --- widgets against the metrics, metrics against the captured lines -------------------------


def metrics() -> dict[str, dict[str, Any]]:
    """Each log-based metric's type, with its terraform body (the layer ones per figure)."""
    out: dict[str, dict[str, Any]] = {}
    for body in resources("google_logging_metric").values():
        if body.get("for_each") == "${local.layer_figures}":
            for figure in local("layer_figures"):
                out[USER + body["name"].replace("${each.key}", figure)] = {**body, "figure": figure}
        else:
            out[USER + body["name"]] = body
    return out


def data_sets() -> list[dict[str, Any]]:
    return [
        ds
        for tile in DASHBOARD["mosaicLayout"]["tiles"]
        for ds in tile["widget"].get("xyChart", {}).get("dataSets", [])
    ]


def test_every_chart_reads_a_metric_terraform_defines_by_its_labels():
    defined = metrics()
    used: set[str] = set()
    for ds in data_sets():
        query = ds["timeSeriesQuery"]["timeSeriesFilter"]
        [metric_type] = re.findall(r'metric.type="([^"]+)"', query["filter"])
        assert metric_type in defined, metric_type
        used.add(metric_type)
        labels = {
            one(lb)["key"] if isinstance(lb, list) else lb["key"]
            for lb in _labels(defined[metric_type])
        }
        for field in query["aggregation"]["groupByFields"]:
            assert field.removeprefix("metric.label.") in labels, (metric_type, field)
    # Every metric shows on the dashboard but the tick's (the tick-silence policy's).
    assert set(defined) - used == {USER + "cave-pipeline/ticks"}


def _labels(body: dict[str, Any]) -> list[dict[str, Any]]:
    labels = one(body["metric_descriptor"]).get("labels", [])
    return labels if isinstance(labels, list) else [labels]


def test_the_dashboard_shows_what_the_issue_asks():
    titles = " | ".join(t["widget"]["title"] for t in DASHBOARD["mosaicLayout"]["tiles"])
    for words in ("Chunks done", "ramp's target", "Pods running", "Retries", "Spend", "Alerts"):
        assert words in titles
    [panel] = [
        t["widget"]["logsPanel"]
        for t in DASHBOARD["mosaicLayout"]["tiles"]
        if "logsPanel" in t["widget"]
    ]
    alerts = [e for e in ENTRIES if matches(panel["filter"], e)]
    assert {e["jsonPayload"]["kind"] for e in alerts} >= {"layer_failed", "approval_needed"}


@pytest.mark.parametrize("metric_type", sorted(metrics()))
def test_each_metric_reads_the_controllers_lines(metric_type):
    """Its filter matches the captured lines of its message (and only those), and its value
    and label extractors name fields those lines carry."""
    body = metrics()[metric_type]
    filter_ = rendered(body["filter"].replace("${each.key}", body.get("figure", "")))
    matched = [e["jsonPayload"] for e in ENTRIES if matches(filter_, e)]
    assert matched, f"{metric_type} matches no captured line"
    messages = {m["message"] for m in matched}
    assert len(messages) == 1
    [message] = messages
    # Only its message: every captured line of it with a value (a null spend is not one).
    extractor = body.get("value_extractor", "").replace("${each.key}", body.get("figure", ""))
    value_field = re.fullmatch(r"EXTRACT\(jsonPayload\.(\w+)\)", extractor)
    if value_field:
        assert all(isinstance(m[value_field.group(1)], int | float) for m in matched)
    expected = [
        e["jsonPayload"]
        for e in ENTRIES
        if e["jsonPayload"]["message"] == message
        and (not value_field or e["jsonPayload"].get(value_field.group(1)) is not None)
    ]
    assert matched == expected
    for extractor in body.get("label_extractors", {}).values():
        field = re.fullmatch(r"EXTRACT\(jsonPayload\.(\w+)\)", extractor).group(1)
        assert all(field in m for m in matched), (metric_type, field)


def test_the_capture_has_a_layer_making_progress():
    layers = [e["jsonPayload"] for e in ENTRIES if e["jsonPayload"]["message"] == "layer progress"]
    assert any(e["chunks_done"] > 0 and e["parallelism"] > 0 for e in layers)
    runs = [e["jsonPayload"] for e in ENTRIES if e["jsonPayload"]["message"] == "run progress"]
    assert any((e["spend_usd"] or 0) > 0 for e in runs)
