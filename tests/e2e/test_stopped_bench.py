"""A bench told to stop (SIGTERM: `timeout`, `kill`, a CI runner) stops what it started: the
emulators and the local cluster's pods, each in a process group of its own that the signal
never reaches, are gone when it exits. `bench/bench_advance.py` runs as it would by hand,
with one run of one pod whose chunk sleeps far longer than the test.

Timeouts below are failure conditions only (something hung), never measurements.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.local.process_groups import group_alive

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("need_emulators")]
EMULATORS = ("pubsub-emulator", "cloud_firestore_emulator", "cbtemulator")
HANG = 300.0  # seconds: the stack and its first pod are up long before this on any machine


def children(pid: int) -> dict[int, str]:
    """The direct children of `pid`: their PID and command line."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            fields = text[text.rfind(")") + 2 :].split()
            if int(fields[1]) == pid:
                out[int(stat.parent.name)] = (stat.parent / "cmdline").read_text()
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
    return out


def _stack_and_pod_up(kids: dict[int, str]) -> bool:
    emulators = [c for c in kids.values() if any(name in c for name in EMULATORS)]
    pods = [c for c in kids.values() if not any(name in c for name in EMULATORS)]
    return len(emulators) == len(EMULATORS) and len(pods) >= 1


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child processes from /proc")
def test_sigterm_stops_the_benchs_emulators_and_pods(tmp_path: Path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    args = ["--runs", "1", "--designs", "after", "--parallelism", "1", "--stagger", "0"]
    with (tmp_path / "out.txt").open("wb") as out:
        bench = subprocess.Popen(
            [sys.executable, "bench/bench_advance.py", *args, "--chunk-s", "3600"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    groups: set[int] = set()
    try:
        deadline = time.monotonic() + HANG
        while not _stack_and_pod_up(kids := children(bench.pid)):
            assert bench.poll() is None, (tmp_path / "out.txt").read_text()
            assert time.monotonic() < deadline, f"no stack and pod after {HANG:g} s: {kids}"
            time.sleep(0.5)
        groups = set(kids)  # each child leads a process group of its own
        bench.send_signal(signal.SIGTERM)
        code = bench.wait(timeout=HANG)
    finally:
        if bench.poll() is None:
            bench.kill()
        left = [g for g in groups if group_alive(g)]
        for g in left:  # the test's own clean-up, by PID
            with contextlib.suppress(ProcessLookupError):
                os.killpg(g, signal.SIGKILL)
    output = (tmp_path / "out.txt").read_text()
    assert left == [], f"process groups left running: {[(g, kids.get(g)) for g in left]}\n{output}"
    assert code == 128 + signal.SIGTERM, output
    assert "stopped by SIGTERM" in output and "Traceback" not in output
