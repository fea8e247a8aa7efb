"""A `pipeline local up` killed outright (SIGKILL: no unwinding) leaves nothing a new one
cannot clear: the control plane dies with it (its death signal), the emulators it left are
found from its stack.json and stopped by the next `local up`, which then starts; a second
`local up` beside a live one is refused at once, naming the pid.

Timeouts below are failure conditions only (something hung), never measurements.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.local.crashed_stack import still_ours
from adapters.local.process_groups import group_alive, signal_group
from tests.builders.cli_stack import _env, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("need_emulators")]
HANG = 180.0


def _up(cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "local", "up", "--tick", "60"],
        cwd=cwd,
        env=_env(),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _ready(proc: subprocess.Popen[bytes], stack: Path, log: Path) -> dict:
    """The stack.json `proc` wrote. A crashed stack's file is there before the next `local up`
    clears it (a quiet machine read it between the check and the read, or as the crashed
    stack's): only a file naming `proc` counts."""
    deadline = time.monotonic() + HANG
    while True:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"local up not ready in {HANG:.0f} s"
        try:
            doc = json.loads(stack.read_text())
        except (FileNotFoundError, json.JSONDecodeError):  # not yet, or being replaced
            doc = {}
        if doc.get("pid") == proc.pid:
            return doc
        time.sleep(0.5)


def _gone(pgids: list[int]) -> bool:
    deadline = time.monotonic() + 20
    while any(group_alive(g) for g in pgids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_sigkilled_local_up_leaves_nothing_the_next_one_does_not_clear(tmp_path: Path) -> None:
    stack = tmp_path / ".local-stack" / "stack.json"
    first = _up(tmp_path, tmp_path / "first.log")
    second = None
    groups: dict = {}
    try:
        doc = _ready(first, stack, tmp_path / "first.log")
        control_plane = list(doc["pids"].values())
        groups = doc["emulator_groups"]
        emulators = [g["pgid"] for g in groups.values()]
        assert (
            set(doc["pids"]) >= {"etcd", "kube-apiserver", "metrics-server"} and len(emulators) == 3
        )

        beside = run_cli(tmp_path, "local", "up", timeout=60)
        assert beside.returncode != 0
        assert f"pid {first.pid}" in beside.stderr, beside.stderr

        first.send_signal(signal.SIGKILL)
        first.wait()
        assert _gone(control_plane), "the control plane outlived its SIGKILLed stack"
        assert all(group_alive(g) for g in emulators)  # what only the next stack can stop

        second = _up(tmp_path, tmp_path / "second.log")
        _ready(second, stack, tmp_path / "second.log")
        assert _gone(emulators), "the crashed stack's emulators still run"
        said = (tmp_path / "second.log").read_text()
        assert "was killed without stopping" in said and "pubsub" in said, said
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for g in groups.values():  # left by a failure before the second stack went
            if still_ours(g["pgid"], g["started"]):
                signal_group(g["pgid"], signal.SIGKILL)
