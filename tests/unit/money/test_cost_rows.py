"""A setup pass is named "setup" wherever a run's costs are listed (`pipeline costs`, its
JSON, `pipeline run`, the report's cost chart), comes before its stage's layers, and is in
the stage subtotals of both commands alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from scripts.commands.costs import costs_table
from scripts.commands.describe import breakdown
from scripts.cost_report import cost_report
from shared.config.config_files import load_config
from shared.model.state import RunState
from shared.reconcile.build_plan import new_run

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(minutes=10)


@pytest.fixture
def run() -> RunState:
    run = new_run(load_config(DEMO), "r-cost", ["ingest"], "auto", T0)
    setup = run.setups["ingest"]
    setup.phase, setup.started_at, setup.finished_at = "succeeded", T0, T0 + timedelta(seconds=40)
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.timing.submitted_at, l2.pods.succeeded = "running", T0 + timedelta(minutes=1), 4
    l2.pods.cpu_seconds, l2.pods.memory_gib_seconds = 400.0, 1600.0
    return run


def _text(table) -> str:  # noqa: ANN001 - a rich Table
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_costs_name_the_setup_pass_and_list_it_first(run):
    report = cost_report(run, NOW)
    assert [(r["layer"], r["key"]) for r in report["layers"]] == [
        ("setup", "ingest-setup"),
        (2, "ingest-L2"),
    ]
    rows = [
        [c.strip() for c in line.split("│")[1:-1]]
        for line in _text(costs_table(report)).splitlines()
    ]
    ingest = [r[:3] for r in rows if r and r[0] == "ingest"]
    assert ingest[:2] == [["ingest", "setup", "succeeded"], ["ingest", "2", "running"]]


def test_pipeline_run_has_the_setup_pass_and_the_same_stage_subtotal(run):
    rows = breakdown(run, NOW)
    assert [r["layer"] for r in rows] == ["setup", 2, 3, 4, 5]
    setup = rows[0]
    assert setup["phase"] == "succeeded" and setup["wall_s"] == 40.0 and setup["pods"] == 1
    report = cost_report(run, NOW)
    assert sum(r["usd"] for r in rows) == pytest.approx(report["stages"]["ingest"])
    assert setup["usd"] > 0


def test_the_reports_cost_chart_labels_the_setup_pass(run):
    pytest.importorskip("plotly", reason="the report needs the `report` extra (plotly)")
    from scripts.report_data import build
    from scripts.views.report import costs

    figure = costs(build(run, {}, NOW))
    assert list(figure.data[0].x) == ["ingest-setup", "ingest-L2"]
