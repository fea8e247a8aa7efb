"""`pipeline status`'s screen: fits 100 columns with nothing cut, keeps one height whatever
the number of layers, and shows the figures an operator steers by."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console

from scripts.views.status import count, status_view
from tests.builders.progress_rows import big_run


def screen(progress, width: int = 100) -> list[str]:
    out = Console(width=width, record=True, color_system=None)
    out.print(status_view(progress))
    return out.export_text().splitlines()


@pytest.mark.parametrize("top", [4, 9, 16])
def test_fits_100_columns_with_nothing_cut(top):
    lines = screen(big_run(top=top, running=3)[1])
    assert max(len(line) for line in lines) <= 100
    assert not any("…" in line for line in lines)


def test_height_is_the_same_for_any_number_of_layers():
    heights = {len(screen(big_run(top=top, running=3)[1])) for top in (9, 12, 16)}
    assert len(heights) == 1


def test_shows_what_an_operator_steers_by():
    text = "\n".join(screen(big_run(top=16, running=6)[1]))
    for words in (
        "4.1k/4.1k",  # ingest-L4 (4096 chunks) done/total in chunks
        "480/471",  # active/ready
        " 0.3 ",  # chunks/min of the slow running layer (24 chunks in 95 min)
        "500/512",  # parallelism/ramp
        "chunks 300k/861k (35%) · 1.0k chunks/min · ETA 9.2h",
        "61 nodes (58 Spot)",
        "960 vCPU, 3840 GiB",
        "of $2500 budget",
        "ingest-L7 waits on ingest-L6 (running)",
        "meshing-L2 waits on stage ingest",
        "(+ 23 behind them waiting)",
        "+ 2 succeeded, 15 waiting not shown",
    ):
        assert words in text, words


@pytest.mark.parametrize(
    "n, text", [(None, ""), (0, "0"), (999, "999"), (4096, "4.1k"), (262144, "262k"), (2e6, "2.0M")]
)
def test_counts_fit_five_characters(n, text):
    assert count(n) == text


@pytest.mark.parametrize("top", [4, 9, 16])
@pytest.mark.parametrize("assumed", [None, 30.0])
def test_the_forecast_fits_100_columns(top, assumed):
    lines = screen(big_run(top=top, running=3, forecast=True, assumed_chunk_s=assumed)[1])
    assert max(len(line) for line in lines) <= 100
    assert not any("…" in line for line in lines)


def test_shows_the_forecast_eta_and_projected_costs():
    """The running layer's ETA and the run's from the forecast (not the average rate), each
    waiting layer's, and the projected costs: spent plus what the forecast says is left."""
    text = "\n".join(screen(big_run(top=16, running=6, forecast=True)[1]))
    for words in (
        "ETA 40.0m (ingest-L6), run 18.0h",  # 27 layers left, 40 min more each
        "projected $199 (ingest-L6), $3273 (run)",  # 123.46 + 75.5; 1234.57 + 27 x 75.5
        "40.0m 123 199",  # the running layer's ETA, spend, projection
        "80.0m     199",  # the next layer: done 80 min from now
    ):
        assert words in text, words
    assert "average rate" not in text
    plain = "\n".join(screen(big_run(top=16, running=6)[1]))
    assert "average rate" in plain and "projected" not in plain  # no forecast: no projection


def test_a_forecast_before_any_pod_finished_says_it_is_a_guess():
    text = "\n".join(screen(big_run(top=16, running=6, forecast=True, assumed_chunk_s=30.0)[1]))
    assert "run 18.0h (guess: 30 s/chunk)" in text
    observed = "\n".join(screen(big_run(top=16, running=6, forecast=True)[1]))
    assert "guess" not in observed


def test_hung_pods_show_in_the_retry_column_within_100_columns():
    run, progress = big_run(top=16, running=6)
    progress.layers[:] = [
        replace(lp, hung=3) if lp.phase == "running" else lp for lp in progress.layers
    ]
    lines = screen(progress)
    assert any("1234 3h" in line for line in lines)
    assert max(len(line) for line in lines) <= 100 and not any("…" in line for line in lines)
    assert any(" 2.6h " in line for line in lines)  # nothing squeezed: the ETA is whole
