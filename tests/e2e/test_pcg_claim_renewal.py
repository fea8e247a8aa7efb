"""A PyChunkedGraph ingest worker keeps its chunk claim against a contender under our
PCG_LOCK_EXPIRY_SCALE, and loses it under the predecessor's scale 1 (docs/images-chunk-lock.md,
"Claim lifetime and renewal").

Both sides run in the predecessor's Python 3.12 venv, on its lock module
(`cave_pipeline.distribution.lock`, 0.0.4) over kvdbclient clients whose lock expiry is the
graph's ROOT_LOCK_EXPIRY (what ChunkedGraph sets), claiming and renewing with the image's own
arithmetic (tests/builders/pcg_image_lock.py, tests/builders/pcg_claim_race.py) against the
Bigtable emulator. Only the lifetime shrinks, to LIFETIME_S, so the test is fast: the scale
we write for it is lifetime / (180 s x (L-1)) as for 3 minutes, and scale 1 renews every
60 s x (L-1) whatever the lifetime.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tests.builders.contract_examples import DATASET, ENV
from tests.builders.pcg_harness import harness_python_or_skip
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("need_emulators")]

ROOT = Path(__file__).resolve().parents[2]
LAYER = 6
LIFETIME_S = 2.0
CHUNK_S = 3.5 * LIFETIME_S  # longer than three claim lifetimes
POLL_S = 0.2  # the contender's PCG_LOCK_POLL_SEC


def our_scale(layer: int, lifetime_s: float) -> float:
    """PCG_LOCK_EXPIRY_SCALE as our Job writes it for a graph with this ROOT_LOCK_EXPIRY."""
    graph_config = {**DATASET["graph_config"], "ROOT_LOCK_EXPIRY": lifetime_s}
    env = replace(ENV, layer=layer, dataset={**DATASET, "graph_config": graph_config})
    return float(env.to_env()["PCG_LOCK_EXPIRY_SCALE"])


def run_race(python: str, table: str, scale: float) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "BIGTABLE_PROJECT": BIGTABLE_PROJECT,
        "BIGTABLE_INSTANCE": BIGTABLE_INSTANCE,
        "PCG_LOCK_POLL_SEC": str(POLL_S),
        # The contender keeps trying for the whole chunk (and past it).
        "PCG_HELD_MAX_WAIT_SEC": str(CHUNK_S + 2 * LIFETIME_S),
    }
    argv = [python, "-m", "tests.builders.pcg_claim_race", table, str(LAYER), repr(scale)]
    out = subprocess.run(
        [*argv, str(LIFETIME_S), str(CHUNK_S)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pcg_python() -> str:
    return harness_python_or_skip()


def test_a_long_chunk_keeps_its_claim_under_our_scale(pcg_python, bigtable_table, capsys):
    _, table = bigtable_table
    scale = our_scale(LAYER, LIFETIME_S)
    result = run_race(pcg_python, table, scale)
    with capsys.disabled():
        print("\nclaim race, our scale:", json.dumps(result))
    # The image renews at most every third of the lifetime ...
    assert result["renew_s"] <= LIFETIME_S / 3
    # ... so the holder, working more than three lifetimes, kept the claim and marked the
    # chunk done; the contender never got it and found it done.
    assert result["holder_finished"] > 3 * LIFETIME_S
    assert (result["holder"], result["contender"]) == ("ok", "done"), result
    assert "contender_acquired" not in result, result


def test_the_predecessors_scale_lets_the_contender_take_a_live_claim(
    pcg_python, bigtable_table, capsys
):
    """The difference: at scale 1 the image renews every 300 s at layer 6, so the claim
    lapses after one lifetime while the holder is still writing; the contender takes it and
    builds the chunk a second time, and the holder's done marker is fenced out."""
    _, table = bigtable_table
    result = run_race(pcg_python, table, 1.0)
    with capsys.disabled():
        print("\nclaim race, scale 1:", json.dumps(result))
    assert result["renew_s"] == 60 * (LAYER - 1)
    assert result["contender"] == "ok", result
    assert LIFETIME_S <= result["contender_acquired"] < result["holder_finished"], result
    assert result["holder"] == "transient", result
