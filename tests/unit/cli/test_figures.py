"""Figures that must read right: a right-size that costs more says so (not "saves -0.0002"),
small amounts keep enough digits (a demo's layer costs a ten-thousandth of a dollar), the
spend line labels the cluster fee that no layer row has, a run with failed layers says so
instead of an ETA, and the demo names the graph's layers as the docs do."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from rich.console import Console

from scripts.commands.demo import built_layers
from scripts.run_progress import gather
from scripts.views.status import rightsize_lines, status_view, usd
from shared.config.config_files import load_config
from shared.model.layers import layer_count
from shared.reconcile.build_plan import new_run
from tests.builders.progress_rows import T0

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "demo" / "pipeline.yml"


def screen(progress, note: str = "") -> str:  # noqa: ANN001 - a RunProgress
    out = Console(width=100, record=True, color_system=None)
    out.print(status_view(progress, note))
    return out.export_text()


@pytest.mark.parametrize(
    "value, text",
    [
        (None, "?"),
        (0.0, "0.00"),
        (1234.5, "1234"),
        (0.5, "0.50"),
        (0.0054, "0.0054"),
        (0.00038, "0.00038"),
        (0.000031, "0.000031"),
        (0.0000002, "0.000000"),  # below a millionth: the cell's width is the limit
        (-0.0002, "-0.00020"),
    ],
)
def test_small_amounts_keep_two_significant_digits(value, text):
    assert usd(value) == text


def _suggestion(savings: float) -> dict:
    return {
        "stage": "ingest", "layer": 2, "basis": "own",
        "requested": {"cpu": 0.25, "memory_gib": 0.5},
        "suggested": {"cpu": 0.75, "memory_gib": 0.75},
        "used": {"cpu_p95": 0.47, "peak_memory_gib": 0.12},
        "savings_usd": savings, "covered": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    "savings, says",
    [(-0.0002, "costs $0.00020 more"), (0.0012, "saves $0.0012"), (0.0, "costs the same")],
)
def test_a_right_size_that_costs_more_says_so(savings, says):
    (line,) = rightsize_lines([_suggestion(savings)])
    assert line.endswith(f"; {says}") and "-0.0" not in line


def _demo_run(phases: dict[str, str]):  # noqa: ANN202 - a RunState
    """The 128^3 demo's ingest: layer 2 done with its pods' usage recorded, the others as
    given."""
    run = new_run(load_config(DEMO), "r-figures", ["ingest"], "auto", T0)
    for key, phase in phases.items():
        ls = run.layers[key]
        ls.phase, ls.timing.submitted_at = phase, T0
        if phase != "running":
            ls.timing.finished_at = T0 + timedelta(seconds=40)
        ls.pods.succeeded, ls.pods.succeeded_runtime_s = 16, 160.0
        ls.pods.cpu_seconds, ls.pods.memory_gib_seconds = 40.0, 80.0
    return run


def test_the_spend_line_labels_the_cluster_fee_and_layer_costs_are_not_zeros():
    run = _demo_run({"ingest-L2": "succeeded", "ingest-L3": "running"})
    progress, note = gather(run, T0 + timedelta(seconds=60), None)
    assert progress.cost_usd is not None and progress.cost_usd < 0.01  # a demo's pennies
    text = screen(progress, note)
    l2 = next(lp for lp in progress.layers if lp.key == "ingest-L2")
    fee = progress.cluster_fee_usd
    assert fee is not None and 0 < fee < progress.cost_usd
    pods = usd(progress.cost_usd - fee)
    assert f"spend ${usd(progress.cost_usd)} (pods ${pods} + cluster fee ${usd(fee)})" in text
    row = next(line for line in text.splitlines() if line.startswith("ingest-L2"))
    assert row.split()[-2] == usd(l2.cost_usd) and float(row.split()[-2]) > 0


def test_a_run_with_failed_layers_says_so_and_has_no_eta():
    run = _demo_run({"ingest-L2": "failed", "ingest-L3": "failed", "ingest-L4": "running"})
    progress, note = gather(run, T0 + timedelta(seconds=60), None)
    assert progress.status == "running" and progress.eta_s is None
    assert progress.failed_layers == ("ingest-L2", "ingest-L3")
    text = screen(progress, note)
    assert "2 layers failed (ingest-L2, ingest-L3): no ETA" in text
    assert "ETA run" not in text and "at the run's average rate" not in text


def test_the_demo_names_the_graphs_layers_as_the_docs_do():
    cfg = load_config(DEMO)  # 128^3 in 16^3 chunks: an 8x8x8 layer-2 grid
    assert cfg.layer2_shape() == (8, 8, 8) and layer_count(cfg.layer2_shape()) == 5
    run = new_run(cfg, "r-layers", ["ingest", "l2cache", "meshing"], "auto", T0)
    assert built_layers(run, 5) == "5 layers, built ingest L2-L5, l2cache L2, meshing L2-L4"
    readme = (REPO / "README.md").read_text()
    assert "16³ chunks: 5 layers" in readme and "585 chunks" in readme
