"""Forecasts (shared.forecast.forecast): the closed-form ramp model, and whole-run ETAs checked
against the simulator that shares the model."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from shared.config.config import Ramp
from shared.config.config_files import load_config
from shared.forecast.forecast import (
    POD_OVERHEAD_S,
    drain_seconds,
    forecast,
    forecast_inputs,
    observed_advance_s,
)
from shared.forecast.simulation.cluster import ClusterParams
from shared.forecast.simulation.engine import T0, SimSettings, simulate
from shared.forecast.simulation.runtimes import Runtimes
from shared.model.phase import Phase
from shared.reconcile.build_plan import new_run
from tests.builders.demo_configs import with_batch

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
FLAT = Ramp(start=10, factor=2, period=100, max=10)


@pytest.mark.parametrize(
    ("pods", "pod_s", "ramp", "elapsed", "want"),
    [
        (0, 10.0, FLAT, 0.0, 0.0),
        (10, 10.0, FLAT, 0.0, 10.0),  # one wave
        (11, 10.0, FLAT, 0.0, 20.0),  # a second, short wave
        (100, 10.0, FLAT, 0.0, 100.0),
        (3, 10.0, FLAT, 0.0, 10.0),  # fewer pods than the cap
        # pods observed shorter than a second (pod times are whole seconds): no time
        (3, 0.0, FLAT, 0.0, 0.0),
        (30, 0.0, FLAT, 0.0, 0.0),
        # ramp 1, 2, 4 every 100 s: 100 + 200 pod-seconds in the first two steps, then 4 wide
        (70, 10.0, Ramp(start=1, factor=2, period=100, max=4), 0.0, 200.0 + 100.0),
        # the same, 150 s into the ramp: 2 wide for 50 s, then 4 wide
        (70, 10.0, Ramp(start=1, factor=2, period=100, max=4), 150.0, 50.0 + 150.0),
    ],
)
def test_drain_seconds(pods, pod_s, ramp, elapsed, want):
    assert drain_seconds(pods, pod_s, ramp, elapsed) == pytest.approx(want)


FOUR = Ramp(start=4, factor=2, period=100, max=4)


@pytest.mark.parametrize(
    ("pods", "in_flight", "want"),
    [
        (7, 0, 20.0),  # nothing under way: two waves
        # 4 under way, staggered by a quarter pod (1/8, 3/8, 5/8, 7/8 left): the 3 queued
        # start as they finish and end 1.125, 1.375, 1.625 pods from now
        (7, 4, 16.25),
        (4, 4, 8.75),  # only the 4 under way: the last has 7/8 of a pod left
        (1, 1, 5.0),  # one pod, half done
    ],
)
def test_drain_seconds_of_a_layer_under_way(pods, in_flight, want):
    assert drain_seconds(pods, 10.0, FOUR, 500.0, in_flight) == pytest.approx(want)


def _demo(size: int = 128, ramp: Ramp | None = None):
    cfg = with_batch(load_config(DEMO))  # the tables below are at 32 chunks a pod
    source = cfg.ds.data_source.model_copy(update={"size": (size,) * 3})
    update = {"dataset_config": cfg.ds.model_copy(update={"data_source": source})}
    if ramp is not None:
        update["job"] = cfg.job.model_copy(update={"ramp": ramp})
    return cfg.model_copy(update=update)


def test_forecast_of_a_fresh_run_matches_the_simulator_within_a_tenth():
    """The same model: pods of a start-up plus their chunks, the ramp, the advances."""
    cfg = _demo()
    settings = SimSettings(
        cluster=ClusterParams(node_startup_s=0.0, warm_start_s=0.0),
        runtimes=Runtimes(chunk_seconds=2.0, sigma=0.01, pod_overhead_s=POD_OVERHEAD_S),
        sink_delay_s=0.0,
    )
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    simulated = simulate(cfg, run, settings)
    fc = forecast(run, *forecast_inputs(cfg, run), T0, 2.0, cfg.controller.tick_period_s / 2)
    assert fc.remaining_s == pytest.approx(simulated.wall_s, rel=0.1)
    assert fc.projected_usd == pytest.approx(simulated.cost_usd, rel=0.15)


DEMO_RAMP = Ramp(start=2, factor=2, period=3, max=4)  # examples/demo: 4 wide after 3 s


@pytest.mark.parametrize(
    ("ramp", "observed_pod_s", "ramp_elapsed_s", "want_l2", "want_l3"),
    [
        # 128^3: L2 16 pods of 32 chunks, 8 done, none running; L3 4 pods of 16 chunks.
        # Start-up 10 s.
        # observed 20 s pods: 8 left 4 wide = 2 waves; L3's are 10 + 16 x (20 - 10) / 32 =
        # 15 s, 3 s 2 wide on its ramp then one wave 4 wide: 18 s
        (DEMO_RAMP, 20.0, 600.0, 40.0, 18.0),
        # nothing observed yet: 10 + 32 x 1 s a chunk (the default) = 42 s pods; L3 26 s
        (DEMO_RAMP, None, 600.0, 84.0, 3.0 + 26.0),
        # pods too short to tell start-up from chunks are split evenly: L3's are 4 + 2 s
        (DEMO_RAMP, 8.0, 600.0, 16.0, 3.0 + 6.0),
        # a cap of 2: 4 waves; L3's 4 pods in 2 waves
        (Ramp(start=2, factor=2, period=3, max=2), 20.0, 600.0, 80.0, 30.0),
        # a slow ramp, just started: 1 wide for 100 s (100 of the 160 pod-seconds left),
        # then 2 wide; L3 starts back at 1 wide, each of its 4 pods in turn
        (Ramp(start=1, factor=2, period=100, max=4), 20.0, 0.0, 100.0 + 30.0, 60.0),
    ],
)
@pytest.mark.parametrize("running", [0, 4])
def test_forecast_from_a_run_state(ramp, observed_pod_s, ramp_elapsed_s, want_l2, want_l3, running):
    """A running layer's ETA from its observed pods, the ramp where it stands and the cap;
    the next layer's from the start-up and the per-chunk time observed below. With pods
    under way (`running`) and some finished, they are half done and staggered."""
    cfg = _demo(ramp=ramp)
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    plans, chunks, rates = forecast_inputs(cfg, run)
    assert (plans["ingest-L2"].completions, chunks["ingest-L2"], chunks["ingest-L3"]) == (
        16,
        32,
        16,
    )
    now = T0 + timedelta(seconds=1000)
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.progress.completed_indexes = "running", "0-7"
    l2.timing.ramp_started_at = now - timedelta(seconds=ramp_elapsed_s)
    if observed_pod_s is not None:
        l2.pods.succeeded, l2.pods.succeeded_runtime_s = 8, 8 * observed_pod_s
    l2.progress.active = min(running, ramp.max if ramp_elapsed_s else ramp.start)
    if running and observed_pod_s is not None:
        if ramp_elapsed_s:  # capped: 8 left, of which `active` half done, then the stagger
            par = ramp.max
            work = (8 - l2.progress.active / 2) * observed_pod_s
            want_l2 = work / par + observed_pod_s * (1 - 1 / par) / 2
        else:  # the slow ramp, 1 wide: its one pod half done, 10 pod-seconds less
            want_l2 = 100.0 + 50.0 / 2
    fc = forecast(run, plans, chunks, rates, now, 1.0, 0.0, 10.0)
    by_key = {lf.key: lf for lf in fc.layers}
    assert by_key["ingest-L2"].remaining_s == pytest.approx(want_l2)
    assert by_key["ingest-L3"].remaining_s == pytest.approx(want_l3)
    assert by_key["ingest-L3"].finishes_in_s == pytest.approx(want_l2 + want_l3)
    assert fc.remaining_s == max(lf.finishes_in_s for lf in fc.layers)


@pytest.mark.parametrize(
    ("hold", "reanchored", "parallelism", "want_l2"),
    [
        ("", False, 2, 40.0),  # the ramp runs: 8 pods of 20 s left, 4 wide (its cap)
        ("Bigtable CPU 84% > controller.bigtable_cpu_max 70%: ramp held", True, 2, 80.0),
        ("Bigtable CPU 100% > ...: parallelism lowered one step", True, 1, 160.0),  # 1 wide
        # held before (its ramp re-anchored), the hold lifted for this reconcile: 2 wide
        ("", True, 2, 80.0),
    ],
)
def test_a_layer_the_bigtable_gate_holds_stays_at_its_parallelism(
    hold, reanchored, parallelism, want_l2
):
    """The load that holds the ramp comes from the pods that run: the forecast keeps the
    held layer where it stands instead of letting the ramp grow again (the 256^3 demo's
    layer 2, held at 2 pods for most of its 60 s, was forecast at 4)."""
    cfg = _demo(ramp=Ramp(start=2, factor=2, period=3, max=4))
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    run.ramp_hold = hold
    plans, chunks, rates = forecast_inputs(cfg, run)
    now = T0 + timedelta(seconds=1000)
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.progress.completed_indexes, l2.job.parallelism = "running", "0-7", parallelism
    l2.timing.submitted_at = now - timedelta(seconds=700)
    l2.timing.ramp_started_at = now - timedelta(seconds=600 if reanchored else 700)
    l2.pods.succeeded, l2.pods.succeeded_runtime_s = 8, 8 * 20.0
    fc = forecast(run, plans, chunks, rates, now, 1.0, 0.0, 10.0)
    assert {lf.key: lf.remaining_s for lf in fc.layers}["ingest-L2"] == pytest.approx(want_l2)


@pytest.mark.parametrize(
    ("wait_s", "want_l2", "want_l3"),
    [
        (0.0, 40.0, 18.0),  # as test_forecast_from_a_run_state: two waves of 20 s pods
        (2.0, 44.0, 3.0 + 17.0),  # each pod waits 2 s for its place: waves of 22 s
        (10.0, 60.0, 3.0 + 25.0),
    ],
)
def test_each_pod_waits_for_its_place_unbilled(wait_s, want_l2, want_l3):
    """`pod_wait_s` (creation to start, measured by a canary) lengthens every pod's place in
    the ramp, the remaining layers' too, and costs nothing."""
    cfg = _demo(ramp=DEMO_RAMP)
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    plans, chunks, rates = forecast_inputs(cfg, run)
    now = T0 + timedelta(seconds=1000)
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.progress.completed_indexes = "running", "0-7"
    l2.timing.ramp_started_at = now - timedelta(seconds=600)
    l2.pods.succeeded, l2.pods.succeeded_runtime_s = 8, 8 * 20.0
    fc = forecast(run, plans, chunks, rates, now, 1.0, 0.0, 10.0, wait_s)
    by_key = {lf.key: lf for lf in fc.layers}
    assert by_key["ingest-L2"].remaining_s == pytest.approx(want_l2)
    assert by_key["ingest-L3"].remaining_s == pytest.approx(want_l3)
    unwaited = forecast(run, plans, chunks, rates, now, 1.0, 0.0, 10.0)
    pods_usd = sum(lf.projected_usd for lf in fc.layers)
    assert pods_usd == pytest.approx(sum(lf.projected_usd for lf in unwaited.layers))


def test_each_layer_ends_when_its_job_is_seen_done():
    """`completion_s` (a canary's last pod done -> its Job seen done) ends every layer left
    after its last pod, so the run ends that much later per layer; no pod costs more."""
    cfg = _demo(ramp=DEMO_RAMP)
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    inputs = forecast_inputs(cfg, run)
    base = forecast(run, *inputs, T0, 1.0, 2.5, 10.0)
    late = forecast(run, *inputs, T0, 1.0, 2.5, 10.0, 0.0, 1.5)
    assert late.remaining_s == pytest.approx(base.remaining_s + 4 * 1.5)  # L2-L5 of 128^3
    for a, b in zip(base.layers, late.layers, strict=True):
        assert b.remaining_s == pytest.approx(a.remaining_s + 1.5)
        assert b.projected_usd == pytest.approx(a.projected_usd)


def test_forecast_uses_the_observed_advance_latency():
    cfg = _demo()
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    inputs = forecast_inputs(cfg, run)
    l2, l3 = run.layers["ingest-L2"], run.layers["ingest-L3"]
    l2.phase, l2.timing.submitted_at, l2.timing.finished_at = (
        "succeeded",
        T0,
        T0 + timedelta(seconds=50),
    )
    l2.pods.succeeded, l2.pods.succeeded_runtime_s = 16, 16 * 20.0
    before = forecast(run, *inputs, T0 + timedelta(seconds=50), 1.0, 2.5, 10.0)
    assert observed_advance_s(run) is None  # nothing waited on another layer yet
    l3.phase, l3.timing.submitted_at = "running", T0 + timedelta(seconds=57)
    l3.timing.ramp_started_at = l3.timing.submitted_at
    after = forecast(run, *inputs, T0 + timedelta(seconds=57), 1.0, 2.5, 10.0)
    assert observed_advance_s(run) == pytest.approx(7.0)
    # L4 and L5 wait 7 s each for their Jobs now, not 2.5 s; L3 runs 15 s in both
    assert after.remaining_s - before.remaining_s == pytest.approx(2 * (7.0 - 2.5) - 2.5)


def test_a_canarys_run_is_not_taken_for_an_advance():
    """Layer 2 waited 11 s after its setup, 10 s of them for its canary: the advance observed
    is the 1 s after the canary was done, not the 11 s."""
    from shared.model.state import SetupState

    cfg = _demo()
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    run.setups["ingest"] = SetupState(
        "ingest", phase="succeeded", finished_at=T0 + timedelta(seconds=2)
    )
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.timing.submitted_at = "running", T0 + timedelta(seconds=13)
    assert observed_advance_s(run) == pytest.approx(11.0)  # no canary: all of it
    l2.canary.phase = Phase.SUCCEEDED
    l2.canary.record = {"finished_at": (T0 + timedelta(seconds=12)).isoformat()}
    assert observed_advance_s(run) == pytest.approx(1.0)
    l2.canary.phase = Phase.FAILED  # a failed canary's record says nothing of when it ended
    assert observed_advance_s(run) == pytest.approx(11.0)


def test_observed_runtimes_beat_the_default():
    cfg = _demo()
    run = new_run(cfg, "f", ["ingest"], "auto", T0)
    plans, chunks, rates = forecast_inputs(cfg, run)
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.timing.ramp_started_at = "running", T0
    l2.progress.completed_indexes = f"0-{plans['ingest-L2'].completions // 2 - 1}"
    now = T0 + timedelta(seconds=600)
    fresh = forecast(run, plans, chunks, rates, now, 1.0, 0.0, 0.0)
    l2.pods.succeeded, l2.pods.succeeded_runtime_s = 10, 10 * 64.0  # 2 s a chunk, observed
    slow = forecast(run, plans, chunks, rates, now, 1.0, 0.0, 0.0)
    assert slow.remaining_s > 1.9 * fresh.remaining_s  # observed beats the default
    assert (fresh.assumed_chunk_s, slow.assumed_chunk_s) == (1.0, None)  # a guess says so
    assert slow.projected_usd > 1.9 * fresh.projected_usd
    l2.progress.completed_indexes = f"0-{plans['ingest-L2'].completions - 2}"
    nearly = forecast(run, plans, chunks, rates, now, 1.0, 0.0, 0.0)
    assert nearly.layers[0].remaining_s < slow.layers[0].remaining_s
