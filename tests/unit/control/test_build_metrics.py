"""The controller's progress log entries (shared.control.build_metrics), the dashboard's
source: a running layer's chunks, parallelism against its ramp, pods, retries; the run's
spend. Table-driven over the demo's layer 2."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.config.config_files import load_config
from shared.control.build_metrics import LAYER_PROGRESS, RUN_PROGRESS, progress_entries
from shared.money.pricing import load_rates
from shared.reconcile.build_plan import new_run, plan_for
from tests.builders.demo_configs import with_batch
from tests.builders.stored_runs import DEMO, NOW

CFG = with_batch(load_config(DEMO))  # the table below is at 32 chunks a pod


def running_run(completed: str, parallelism: int, active: int, failed: int, ramp_for_s: float):
    run = new_run(CFG, "r1", ["ingest"], "auto", NOW)
    run.setups.clear()
    ls = run.layers["ingest-L2"]
    ls.phase = "running"
    ls.job.name, ls.job.parallelism = "j", parallelism
    ls.job.completions = plan_for(CFG, run).layers["ingest-L2"].completions  # 16 batches of 32
    ls.timing.submitted_at = ls.timing.ramp_started_at = NOW - timedelta(seconds=ramp_for_s)
    ls.progress.completed_indexes, ls.progress.active, ls.pods.failed = completed, active, failed
    ls.pods.cpu_seconds = 3600.0
    return run


@pytest.mark.parametrize(
    ("completed", "parallelism", "active", "failed", "ramp_for_s", "done"),
    [
        ("", 1, 1, 0, 0.0, 0),
        ("0-3", 2, 2, 1, 0.0, 128),  # 4 batches of 32 chunks
        ("0-15", 4, 0, 3, 10**6, 512),  # all: every chunk of the demo's layer 2
    ],
)
def test_a_running_layers_entry(completed, parallelism, active, failed, ramp_for_s, done):
    run = running_run(completed, parallelism, active, failed, ramp_for_s)
    plan = plan_for(CFG, run)
    rates = load_rates()
    run_entry, *layers = progress_entries(CFG, run, plan, rates, NOW)
    assert run_entry["message"] == RUN_PROGRESS and run_entry["layers_running"] == 1
    assert run_entry["spend_usd"] > 0  # an hour of vCPU is billed
    [layer] = layers
    assert layer["message"] == LAYER_PROGRESS
    assert (layer["stage"], layer["layer"], layer["chunks_total"]) == ("ingest", 2, 512)
    assert layer["chunks_done"] == done
    assert layer["parallelism"] == parallelism and layer["pods_running"] == active
    assert layer["retries"] == failed
    # The ramp's target: never below the current parallelism, at most the Job's size; a
    # ramp started long ago is at its cap.
    if ramp_for_s:
        assert layer["ramp_target"] == min(16, CFG.job.for_stage("ingest").ramp.max)
    assert parallelism <= layer["ramp_target"] <= 16


def test_no_layer_entry_for_a_layer_not_running_and_no_spend_without_rates():
    run = new_run(CFG, "r1", ["ingest"], "auto", NOW)
    entries = progress_entries(CFG, run, plan_for(CFG, run), (), NOW)
    assert [e["message"] for e in entries] == [RUN_PROGRESS]
    assert entries[0]["spend_usd"] is None
