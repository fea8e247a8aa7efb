"""The ramp's Bigtable gate, table-driven: the verdict from the load and the limit, the step
down, the re-anchored ramp; and through `decide`, a ramp that holds under an overload and
grows again one step a period once the load falls."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.config.config import ControllerSettings, Ramp
from shared.forecast.simulation.engine import T0 as SIM_T0
from shared.forecast.simulation.engine import SimSettings, simulate
from shared.model.state import RunState, build_layers
from shared.reconcile.bigtable_load import (
    Overload,
    gate,
    parse_overload,
    reanchor,
    step_down,
    throttle,
)
from shared.reconcile.build_plan import new_run
from shared.reconcile.decide import decide, ramp_target
from shared.reconcile.decision import LayerPlan, PatchJob, Plan, Snapshot
from tests.builders.decide_runs import job

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RAMP = Ramp(start=2, factor=2, period=60, max=64)


@pytest.mark.parametrize(
    ("load", "cpu_max", "verdict"),
    [
        (None, 0.7, "ramp"),  # unknown load: never holds
        (0.5, None, "ramp"),  # no gate
        (0.5, 0.7, "ramp"),
        (0.7, 0.7, "ramp"),  # at the limit: still ramps
        (0.71, 0.7, "hold"),
        (0.85, 0.7, "hold"),  # at limit + 0.15: holds, does not lower
        (0.86, 0.7, "lower"),
        (1.0, 0.7, "lower"),
        (0.95, 0.9, "hold"),
    ],
)
def test_verdict_from_load_and_limit(load, cpu_max, verdict):
    g = gate(load, cpu_max)
    assert g.verdict == verdict
    assert (g.reason == "") == (verdict == "ramp")
    if verdict != "ramp":
        assert "controller.bigtable_cpu_max" in g.reason


@pytest.mark.parametrize(
    ("parallelism", "factor", "want"),
    [(16, 2, 8), (5, 2, 2), (1, 2, 1), (2, 2, 1), (10, 1.5, 6), (10, 1, 9), (3, 1.05, 2)],
)
def test_step_down_is_one_ramp_step_at_least_one_pod(parallelism, factor, want):
    assert step_down(parallelism, factor) == want


@pytest.mark.parametrize(
    ("verdict_load", "target", "parallelism", "want"),
    [
        (0.5, 16, 8, 16),  # free: the ramp's target
        (0.8, 16, 8, 8),  # hold: no increase
        (0.8, 4, 8, 4),  # hold never raises (a lowered ramp.max still lowers)
        (0.9, 16, 8, 4),  # lower: one step below what runs
        (0.9, 1, 1, 1),  # never below one pod
    ],
)
def test_throttle(verdict_load, target, parallelism, want):
    got = throttle(gate(verdict_load, 0.7), target, parallelism, RAMP, T0)
    assert got.parallelism == want
    assert (got.ramp_started_at is None) == (verdict_load <= 0.7)
    assert (got.lowered_at is not None) == (verdict_load > 0.85)


@pytest.mark.parametrize(
    ("since_s", "lag_s", "want"),
    [
        (30, 0, 8),
        (59, 0, 8),
        (60, 0, 4),
        (300, 0, 4),
        # a load seen late (Cloud Monitoring: 270 s) still shows the pods taken away by
        # the last step: no second step until it can show them gone
        (60, 270, 8),
        (269, 270, 8),
        (270, 270, 4),
        (30, 10, 8),  # the local meter's 10 s window, under a 60 s period: the period rules
    ],
)
def test_at_most_one_step_down_per_ramp_period_and_load_lag(since_s, lag_s, want):
    lowered_at = T0 - timedelta(seconds=since_s)
    got = throttle(gate(0.95, 0.7, lag_s), 16, 8, RAMP, T0, lowered_at)
    assert got.parallelism == want


@pytest.mark.parametrize("parallelism", [1, 2, 3, 4, 7, 8, 16, 64])
def test_reanchored_ramp_stands_at_most_at_parallelism_and_grows_one_period_later(parallelism):
    started = reanchor(RAMP, parallelism, T0)
    now_value = ramp_target(RAMP, 1000, started, T0)
    assert now_value <= max(parallelism, RAMP.start)
    later = ramp_target(RAMP, 1000, started, T0 + timedelta(seconds=RAMP.period))
    assert later > parallelism or later == RAMP.max


def test_controller_setting_is_validated_naming_the_key():
    assert ControllerSettings().bigtable_cpu_max == 0.7
    with pytest.raises(ValueError, match="bigtable_cpu_max"):
        ControllerSettings(bigtable_cpu_max=1.5)


def _run() -> RunState:
    run = RunState("r1", "g", ["ingest"], {"ingest": 2}, advance="auto")
    run.layers = build_layers(["ingest"], {"ingest": 2})
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", "j", 1000, 2
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = T0
    return run


def ramp_timeline(loads: list[float], lag_s: float = 0.0) -> list[tuple[int, str]]:
    """Parallelism and the status reason after each one-minute tick under `loads`, seen
    `lag_s` late (the monitor's load_lag_s)."""
    plan = Plan({"ingest-L2": LayerPlan(1000, RAMP, job_name="j")}, bigtable_cpu_max=0.7)
    run, parallelism, out = _run(), 2, []
    for minute, load in enumerate(loads, start=1):
        now = T0 + timedelta(minutes=minute)
        snap = Snapshot(run, {"j": job("j", completions=1000, parallelism=parallelism)})
        snap = replace(snap, bigtable_load=load, bigtable_load_lag_s=lag_s)
        d = decide(snap, plan, None, now)
        run = d.state
        patches = [a for a in d.actions if isinstance(a, PatchJob)]
        parallelism = patches[-1].parallelism if patches else parallelism
        out.append((parallelism, run.ramp_hold))
    return out


def test_ramp_holds_under_overload_steps_down_above_margin_and_resumes_gradually():
    timeline = ramp_timeline([0.2, 0.2, 0.8, 0.8, 0.95, 0.95, 0.8, 0.3, 0.3, 0.3])
    assert [p for p, _ in timeline] == [4, 8, 8, 8, 4, 2, 2, 4, 8, 16]
    reasons = [r for _, r in timeline]
    assert reasons[0] == "" and "ramp held" in reasons[2]
    assert "lowered one step" in reasons[4] and reasons[7] == ""


def test_a_load_seen_late_is_not_stepped_down_again_before_it_can_show_the_step():
    """Cloud Monitoring shows the load minutes late: the reconciles after a step down still
    read the load of before, and stepping down on each would reach one pod (8 -> 4 -> 2 -> 1
    here); with the monitor's lag the gate holds until the step can have shown."""
    loads = [0.2, 0.2, 0.95, 0.95, 0.95, 0.95, 0.95]
    assert [p for p, _ in ramp_timeline(loads)] == [4, 8, 4, 2, 1, 1, 1]
    late = ramp_timeline(loads, lag_s=270.0)  # 4.5 minutes: one step per five ticks
    assert [p for p, _ in late] == [4, 8, 4, 4, 4, 4, 4]
    assert "lowered one step" in late[3][1]  # the verdict stands; the step waits


def test_an_operator_pin_is_not_throttled():
    run = _run()
    run.layers["ingest-L2"].job.scale_override = 10
    plan = Plan({"ingest-L2": LayerPlan(1000, RAMP, job_name="j")}, bigtable_cpu_max=0.7)
    snap = Snapshot(run, {"j": job("j", completions=1000, parallelism=2)}, bigtable_load=0.99)
    d = decide(snap, plan, None, T0 + timedelta(minutes=5))
    assert PatchJob("j", parallelism=10) in d.actions


@pytest.mark.parametrize(
    ("load", "want"),
    [
        (0.5, ""),
        (0.82, "ramp held, Bigtable CPU 82%"),
        (0.95, "parallelism lowered, Bigtable CPU 95%"),
    ],
)
def test_status_says_why_the_ramp_holds_within_100_columns(load, want):
    from rich.console import Console

    from scripts.views.status import status_view
    from tests.builders.progress_rows import big_run

    progress = replace(big_run(top=9, running=3)[1], ramp_hold=gate(load, 0.7).reason)
    console = Console(width=100, record=True, color_system=None)
    console.print(status_view(progress))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert (want in lines[1]) if want else ("chunks/min" in lines[1] or "no rate" in lines[1])


@pytest.mark.parametrize(
    ("text", "want"),
    [("600-1800:0.8", (600.0, 1800.0, 0.8)), ("0-60:1", (0.0, 60.0, 1.0))],
)
def test_overload_option_parses(text, want):
    o = parse_overload(text)
    assert (o.start_s, o.end_s, o.load) == want
    assert o.at(want[0]) == want[2] and o.at(want[1]) is None


@pytest.mark.parametrize("text", ["600:0.8", "1800-600:0.8", "0-60:1.5", "a-b:c", ""])
def test_a_bad_overload_names_the_option_and_the_form(text):
    with pytest.raises(ValueError, match="--bigtable-overload .*START-END:LOAD"):
        parse_overload(text)


def test_simulated_overload_holds_the_ramp_for_its_span():
    from tests.builders.demo_configs import demo_cfg

    cfg = demo_cfg(size=128, ramp=Ramp(start=2, factor=2, period=60, max=16))
    run = new_run(cfg, "sim", ["ingest"], "auto", SIM_T0)

    def timeline(load: float) -> list[tuple[float, float | None, int, str]]:
        settings = SimSettings(max_sim_s=900, bigtable_overload=(Overload(0, 10**6, load),))
        return simulate(cfg, run, settings).ramp_timeline

    free, held = timeline(0.5), timeline(0.8)
    assert max(p for _, _, p, _ in free) > 2 and all(why == "" for *_, why in free)
    assert max(p for _, _, p, _ in held) == 2  # never past the ramp's start
    # (the reconcile that starts a layer finds none running yet: nothing to hold there)
    assert all("ramp held" in why for t, _, p, why in held if p and t > 0)
