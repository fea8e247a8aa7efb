"""Forecasts (shared.forecast): the closed-form ramp model, and whole-run ETAs checked
against the simulator that shares the model."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from shared.build_plan import new_run
from shared.config import Ramp, load_config
from shared.forecast import drain_seconds, forecast, forecast_inputs
from shared.simulation.cluster import ClusterParams
from shared.simulation.engine import T0, SimSettings, simulate
from shared.simulation.runtimes import Runtimes

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"
FLAT = Ramp(start=10, factor=2, period=100, max=10)


@pytest.mark.parametrize(
    ("pods", "pod_s", "ramp", "elapsed", "want"),
    [
        (0, 10.0, FLAT, 0.0, 0.0),
        (10, 10.0, FLAT, 0.0, 10.0),  # one wave
        (11, 10.0, FLAT, 0.0, 20.0),  # a second, short wave
        (100, 10.0, FLAT, 0.0, 100.0),
        (3, 10.0, FLAT, 0.0, 10.0),  # fewer pods than the cap
        # ramp 1, 2, 4 every 100 s: 100 + 200 pod-seconds in the first two steps, then 4 wide
        (70, 10.0, Ramp(start=1, factor=2, period=100, max=4), 0.0, 200.0 + 100.0),
        # the same, 150 s into the ramp: 2 wide for 50 s, then 4 wide
        (70, 10.0, Ramp(start=1, factor=2, period=100, max=4), 150.0, 50.0 + 150.0),
    ],
)
def test_drain_seconds(pods, pod_s, ramp, elapsed, want):
    assert drain_seconds(pods, pod_s, ramp, elapsed) == pytest.approx(want)


def test_forecast_of_a_fresh_run_matches_the_simulator_within_a_tenth():
    cfg = load_config(DEMO)
    source = cfg.ds.data_source.model_copy(update={"size": (128, 128, 128)})
    cfg = cfg.model_copy(
        update={"dataset_config": cfg.ds.model_copy(update={"data_source": source})}
    )
    settings = SimSettings(
        cluster=ClusterParams(node_startup_s=0.0, warm_start_s=0.0),
        runtimes=Runtimes(chunk_seconds=2.0, sigma=0.01, pod_overhead_s=0.0),
        sink_delay_s=0.0,
    )
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    simulated = simulate(cfg, run, settings)
    fc = forecast(run, *forecast_inputs(cfg, run), T0, 2.0, cfg.controller.tick_period_s / 2)
    assert fc.remaining_s == pytest.approx(simulated.wall_s, rel=0.1)
    assert fc.projected_usd == pytest.approx(simulated.cost_usd, rel=0.15)


def test_forecast_uses_observed_runtimes_and_progress():
    cfg = load_config(DEMO)
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    plans, chunks, rates = forecast_inputs(cfg, run)
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.ramp_started_at = "running", T0
    l2.completed_indexes = f"0-{plans['ingest-L2'].completions // 2 - 1}"
    fresh = forecast(run, plans, chunks, rates, T0 + timedelta(seconds=600), 1.0, 0.0)
    l2.pods_succeeded, l2.succeeded_runtime_s = 10, 10 * 64.0  # 2 s a chunk, observed
    slow = forecast(run, plans, chunks, rates, T0 + timedelta(seconds=600), 1.0, 0.0)
    assert slow.remaining_s > 1.9 * fresh.remaining_s  # observed beats the default
    l2.completed_indexes = f"0-{plans['ingest-L2'].completions - 2}"
    nearly = forecast(run, plans, chunks, rates, T0 + timedelta(seconds=600), 1.0, 0.0)
    assert nearly.layers[0].remaining_s < slow.layers[0].remaining_s
