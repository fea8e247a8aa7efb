"""The README's "Running a build on the local stack by hand", command by command, as a
newcomer types them: demo data, local up (in the background), setup, start with approve,
approve, status until done, costs, report. Each command runs as its own process in one
folder, so the CLI finds the stack as it would in a terminal (`.local-stack/stack.json`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = "r1"
pytestmark = pytest.mark.e2e


def pipeline(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`pipeline ARGS` in `cwd`; fails the test with its output if it exits non-zero."""
    done = subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"pipeline {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    env = {k: v for k, v in env.items() if "EMULATOR_HOST" not in k}
    return {**env, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def local_stack(need_emulators, tmp_path: Path) -> Iterator[Path]:
    """`pipeline local up --tick 2` in the background in tmp_path, until the test ends."""
    log = (tmp_path / "local-up.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "local", "up", "--tick", "2"],
        cwd=tmp_path,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / ".local-stack" / "stack.json").exists():
            assert proc.poll() is None, (tmp_path / "local-up.log").read_text()
            assert time.monotonic() < deadline, "local up did not start in 180 s"
            time.sleep(0.5)
        yield tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_the_readme_by_hand_section_builds_the_demo(local_stack: Path):
    here = local_stack
    out = pipeline(here, "demo", "data", "demo-data").stdout
    assert "next: pipeline setup" in out
    cfg = "demo-data/pipeline.yml"
    setup = pipeline(here, "setup", "-c", cfg)
    assert "Warning" not in setup.stderr and "Bigtable emulator" not in setup.stderr
    # The pods' Secret, in the local cluster's folder: a placeholder cave-secret.json.
    assert "secret cloud-volume-secrets ready in local cluster" in setup.stdout
    secrets = list((here / ".local-stack").rglob("secrets/cloud-volume-secrets/cave-secret.json"))
    assert [p.read_text() for p in secrets] == ['{"token": "placeholder"}']
    pipeline(here, "start", "-c", cfg, "--run-id", RUN, "--advance", "approve")
    # Layer 2 waits on the stage's setup pass (no approval needed), then on its approval.
    deadline = time.monotonic() + 120
    while True:
        first = json.loads(pipeline(here, "status", RUN, "--json").stdout)
        waiting = {row["key"]: row["waits_on"] for row in first["layers"]}
        if not waiting["ingest-L2"].startswith(("ingest setup (waiting", "ingest setup (running")):
            break
        assert time.monotonic() < deadline, f"setup still not done after 120 s: {waiting}"
        time.sleep(1)
    assert waiting["ingest-L2"].startswith("approval: pipeline approve r1 ingest 2"), waiting
    # the forecast: every layer still to build, the run's ETA and projected cost
    assert first["eta_basis"] == "forecast" and first["eta_s"] > 0 and first["projected_usd"] > 0
    assert all(row["eta_s"] > 0 for row in first["layers"])
    assert "approved ingest-L2" in pipeline(here, "approve", RUN, "ingest").stdout
    deadline = time.monotonic() + 300
    while True:
        doc = json.loads(pipeline(here, "status", RUN, "--json").stdout)
        if doc["status"] != "running":
            break
        assert time.monotonic() < deadline, f"run still running after 300 s: {doc}"
        time.sleep(2)
    assert doc["status"] == "succeeded"
    assert doc["chunks_done"] == doc["chunks_total"] == 64 + 8 + 1  # 4^3, 2^3, 1
    screen = pipeline(here, "status", RUN, "-o").stdout
    assert "chunks 73/73 (100%)" in screen and "ingest-L4" in screen
    assert "Warning" not in screen and "warn" not in screen.lower()
    costs = pipeline(here, "costs", RUN).stdout
    assert "ingest" in costs and "total" in costs
    breakdown = json.loads(pipeline(here, "run", RUN, "--json").stdout)
    assert sum(r["chunks_done"] for r in breakdown["layers"]) == 73
    assert breakdown["eta_s"] == 0 and breakdown["projected_usd"] > 0  # done: what it cost
    assert all(r["pods"] >= 1 and r["wall_s"] > 0 for r in breakdown["layers"])
    out = pipeline(here, "report", RUN, "-o", "r1.html").stdout
    assert "wrote r1.html" in out
    html = (here / "r1.html").read_text()
    assert "Pod attempts by layer" in html and "Plotly.newPlot" in html
