"""The demo's forecast recorder (scripts.demo_run.EtaRecorder): an entry each time a layer
finishes and mid-layer ones as a running layer moves on, and the error at 40 % of the run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scripts.demo_run import EtaRecorder
from shared.config.config_files import load_config
from shared.forecast.simulation.engine import T0
from shared.reconcile.build_plan import new_run

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"


def test_entries_when_a_layer_moves_on_a_tenth_and_when_it_finishes():
    cfg = load_config(DEMO)  # 128^3: ingest L2 has 16 batches
    run = new_run(cfg, "r", ["ingest"], "auto", T0)
    etas = EtaRecorder(cfg, time.monotonic(), step=0.1, every_s=1e9)
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.job.completions, l2.timing.ramp_started_at, l2.timing.submitted_at = (
        "running",
        16,
        T0,
        T0,
    )
    steps = [
        ("", 0),  # nothing done yet
        ("0", 0),  # 1 of 16: under a tenth
        ("0-1", 1),  # 2 of 16: a tenth more
        ("0-2", 1),
        ("0-3", 2),
    ]
    for completed, mid in steps:
        l2.progress.completed_indexes = completed
        etas.observe(run)
        assert (etas.mid_layer, len(etas.entries)) == (mid, mid), completed
    l2.phase, l2.progress.completed_indexes, l2.timing.finished_at = "succeeded", "0-15", T0
    etas.observe(run)
    assert (etas.mid_layer, len(etas.entries)) == (2, 3)  # the finish: not mid-layer
    etas.observe(run)  # nothing new, nothing running
    assert len(etas.entries) == 3
    assert all(total >= elapsed >= 0 for elapsed, total in etas.entries)


def test_entries_every_few_seconds_while_a_layer_runs():
    cfg = load_config(DEMO)
    run = new_run(cfg, "r", ["ingest"], "auto", T0)
    etas = EtaRecorder(cfg, time.monotonic(), step=1.0, every_s=0.0)
    run.layers["ingest-L2"].phase = "running"
    etas.observe(run)
    etas.observe(run)
    assert etas.mid_layer == 2


@pytest.mark.parametrize(
    ("entries", "wall", "want"),
    [
        ([[10.0, 100.0], [40.0, 110.0], [90.0, 100.0]], 100.0, 0.1),  # the one at 40 s
        ([[10.0, 80.0], [70.0, 100.0]], 100.0, -0.2),  # 10 s is nearer 40 s than 70 s
        ([], 100.0, None),
    ],
)
def test_error_at_40_percent(entries, wall, want):
    etas = EtaRecorder(load_config(DEMO), 0.0)
    etas.entries = entries
    assert etas.error_at(wall) == want
