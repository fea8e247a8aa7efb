"""The CLI as an operator runs it against `pipeline local up` in a folder: each command its
own process, the stack found through `.local-stack/stack.json` (as tests/e2e/test_by_hand.py
does)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    env = {k: v for k, v in env.items() if "EMULATOR_HOST" not in k}
    return {**env, "PYTHONPATH": str(ROOT)}


def run_cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`pipeline ARGS` in `cwd`, whatever its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pipeline(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`pipeline ARGS` in `cwd`; fails the test with its output if it exits non-zero."""
    done = run_cli(cwd, *args, timeout=timeout)
    assert done.returncode == 0, f"pipeline {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def refused(cwd: Path, *args: str) -> str:
    """`pipeline ARGS` that must exit non-zero; its output (stdout and stderr)."""
    done = run_cli(cwd, *args)
    assert done.returncode != 0, f"pipeline {' '.join(args)} succeeded:\n{done.stdout}"
    return done.stdout + done.stderr


def status(cwd: Path, run_id: str) -> dict[str, Any]:
    return json.loads(pipeline(cwd, "status", run_id, "--json").stdout)


def wait_status(cwd: Path, run_id: str, until: Any, what: str, timeout: float = 300) -> dict:
    """Poll `pipeline status --json` until `until(doc)`; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        doc = status(cwd, run_id)
        if until(doc):
            return doc
        assert time.monotonic() < deadline, f"{run_id}: not {what} after {timeout} s: {doc}"
        time.sleep(1)


@pytest.fixture
def local_stack(need_emulators: None, tmp_path: Path) -> Iterator[Path]:
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
