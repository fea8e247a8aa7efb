"""`pipeline demo --chaos N` at CI size: every cheap fault kind injected once into a 64^3
build on the local stack, and the run still finishes with the oracle agreeing, no chunk lost
and no chunk processed twice where unsafe, counted from the graph table (docs/chaos.md).

The three pod faults strike mid-write: each leaves rows of an unfinished attempt in the table,
which the next attempt must find and delete (the demo ingest's crash clean-up); with that
clean-up switched off this test fails (duplicated components, `partial_writes_left`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shared.chaos import chaos_plan as cp

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("need_emulators")]

# The fault-free 64^3 build takes 15-40 s (idle to busy machine). The faults are spread over
# the first 70 % of a shorter span, so each is due while layer 2 still has chunks to begin
# (a fault due after the run ended would not be injected).
BASELINE_WALL_S = "12"


def test_cheap_chaos_at_ci_size(tmp_path):
    n = len(cp.CHEAP)
    proc = subprocess.run(
        [
            sys.executable, "-m", "scripts.cli", "demo", "--size", "64", "--json",
            "--timeout", "200", "--workdir", str(tmp_path / "work"),
            "--chaos", str(n), "--chaos-kinds", "cheap", "--chaos-seed", "3",
            "--baseline-wall-s", BASELINE_WALL_S,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=285,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True and summary["oracle"]["ok"] is True
    assert summary["status"] == "succeeded"
    assert summary["chunks_lost"] == 0, summary["chunks_lost_by_layer"]
    assert summary["chunks_processed_twice_where_unsafe"] == 0, summary["unsafe_reasons"]
    assert summary["chunks_unmarked_by_layer"] == {}
    # each pod fault left rows mid-write, each found and deleted by the next attempt, but
    # the zombie's: it kept its live claim and finished its chunk itself (docs/zombies.md)
    assert summary["partial_writes_left"] == 0
    assert summary["partial_writes_recovered"] + summary["zombie_chunks_finished"] == 3
    # the lost node left a zombie: it never took over a live claim, nor was its taken
    assert summary["zombies"] == 1
    assert summary["zombie_chunks_finished"] + summary["zombie_writes_fenced"] == 1
    assert summary["zombie_takeovers_of_live_claims"] == 0
    # every planned fault was actually injected: one of each cheap kind
    assert summary["faults_not_injected"] == {}
    assert summary["faults"] == summary["faults_planned"] == dict.fromkeys(cp.CHEAP, 1)
    assert summary["baseline_wall_s"] == float(BASELINE_WALL_S)
    assert summary["extra_wall_s"] == pytest.approx(summary["wall_s"] - 12.0, abs=0.02)
