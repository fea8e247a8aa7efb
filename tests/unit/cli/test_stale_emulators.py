"""A shell whose local stack stopped while its `*_EMULATOR_HOST` exports stayed: the commands
fail within seconds naming the address that does not answer and why, with the "unreachable"
exit code (3), instead of the clients' silent minutes of retries; `pipeline doctor` names the
local stack's fix, not `gcloud auth`.

The address is a bound port that does not listen (refused at once). Each command runs as its
own process under a 30 s subprocess timeout: a bound on a hang (the clients retry for about
293 s), not a measurement.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.common.emulator_probe import EMULATOR_VARS, check_emulators

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "demo" / "pipeline.yml"
HANG_S = 30  # a command still there after this has hung
UNREACHABLE = 3  # docs/cli.md's exit code for a service that could not be reached


@pytest.fixture
def dead_address() -> Iterator[str]:
    """127.0.0.1:PORT where nothing listens (held bound, so no one else takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIPELINE_") and k not in EMULATOR_VARS
    }
    return {**env, "PYTHONPATH": str(REPO), **extra}


def _pipeline(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


def _stale_env(address: str) -> dict[str, str]:
    return _env(PIPELINE_PROJECT="p-stale", **dict.fromkeys(EMULATOR_VARS, address))


@pytest.mark.parametrize(
    "args",
    [
        ("status", "r1", "-o"),
        ("-v", "status", "r1"),
        ("approve", "r1", "ingest"),
        ("runs",),
        ("start", "-c", str(DEMO)),
    ],
    ids=lambda a: " ".join(a),
)
def test_a_stale_emulator_address_fails_at_once_naming_it(tmp_path, dead_address, args):
    done = _pipeline(tmp_path, _stale_env(dead_address), *args)
    assert done.returncode == UNREACHABLE, done.stderr
    assert f"nothing answers at {dead_address} (FIRESTORE_EMULATOR_HOST)" in done.stderr
    assert "local stack is probably down" in done.stderr
    assert "unset FIRESTORE_EMULATOR_HOST PUBSUB_EMULATOR_HOST BIGTABLE_EMULATOR_HOST" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_a_stale_stack_file_is_named_as_the_cause(tmp_path, dead_address):
    # `pipeline local up` killed without its clean-up leaves .local-stack/stack.json behind.
    stack = tmp_path / ".local-stack"
    stack.mkdir()
    env = {"PIPELINE_PROJECT": "p-stale", **dict.fromkeys(EMULATOR_VARS, dead_address)}
    (stack / "stack.json").write_text(json.dumps({"env": env}))
    done = _pipeline(tmp_path, _env(), "runs")
    assert done.returncode == UNREACHABLE, done.stderr
    assert f"nothing answers at {dead_address}" in done.stderr
    assert ".local-stack/stack.json names it" in done.stderr


def test_doctor_on_a_stopped_local_stack_names_the_address_and_the_local_fix(
    tmp_path, dead_address
):
    done = _pipeline(tmp_path, _stale_env(dead_address), "doctor", "-c", str(DEMO), "--json")
    assert done.returncode == UNREACHABLE, done.stderr
    doc = json.loads(done.stdout)
    assert doc["target"] == "local"
    unreachable = {c["check"]: c for c in doc["checks"] if c["verdict"] == "unreachable"}
    assert set(unreachable) == {"firestore", "pubsub", "graph-table"}
    for check in unreachable.values():
        assert f"nothing answers at {dead_address}" in check["detail"]
        assert "gcloud auth" not in check["fix"] and "pipeline local up" in check["fix"]


def test_the_probe_passes_a_listening_emulator_and_the_cloud(dead_address):
    with socket.create_server(("127.0.0.1", 0)) as server:
        live = f"127.0.0.1:{server.getsockname()[1]}"
        check_emulators({"FIRESTORE_EMULATOR_HOST": live})
        with pytest.raises(ConnectionError, match="PUBSUB_EMULATOR_HOST"):
            check_emulators({"FIRESTORE_EMULATOR_HOST": live, "PUBSUB_EMULATOR_HOST": dead_address})
    check_emulators({})  # no emulator named: the cloud, nothing to probe
