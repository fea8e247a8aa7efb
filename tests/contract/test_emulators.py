"""The gcloud emulators start, serve, and stop without leaving processes behind."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.local.emulators import (
    EmulatorMissingError,
    EmulatorSet,
    EmulatorStartError,
    check_emulators,
    start_emulator,
)

PACKAGES = {
    "pubsub": "google-cloud-cli-pubsub-emulator",
    "firestore": "google-cloud-cli-firestore-emulator",
    "bigtable": "google-cloud-cli-bigtable-emulator",
}


def _installed() -> bool:
    try:
        check_emulators()
    except EmulatorMissingError:
        return False
    return True


needs_emulators = pytest.mark.skipif(not _installed(), reason="gcloud emulators not installed")


def _assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # children share the process group; exited ones may linger a moment as zombies of init
    deadline = time.monotonic() + 30  # a timeout, not a bound on how fast the group goes
    while True:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"process group {pid} still has members"
        time.sleep(0.05)


def test_missing_binaries_name_the_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLOUDSDK_ROOT", str(tmp_path))
    with pytest.raises(EmulatorMissingError) as err:
        check_emulators()
    message = str(err.value)
    assert "apt-get install" in message
    for name, package in PACKAGES.items():
        assert f"{name}: no executable at" in message
        assert package in message
        assert package in err.value.packages
    assert str(tmp_path / "platform/bigtable-emulator/cbtemulator") in message


def test_start_of_missing_binary_fails_fast(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLOUDSDK_ROOT", str(tmp_path))
    with pytest.raises(EmulatorMissingError, match="apt-get install google-cloud-cli-bigtable"):
        start_emulator("bigtable")
    with pytest.raises(EmulatorMissingError, match="firestore-emulator"):
        EmulatorSet(["bigtable", "firestore"]).start()


def test_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown emulator"):
        EmulatorSet(["spanner"])


@needs_emulators
@pytest.mark.emulator
@pytest.mark.parametrize("name", ["bigtable", "firestore"])  # firestore: bash wrapper + java
def test_start_then_stop_leaves_nothing(name: str) -> None:
    emu = start_emulator(name, timeout=30)
    try:
        assert emu.address == f"127.0.0.1:{emu.port}"
        socket.create_connection(("127.0.0.1", emu.port), timeout=1).close()
        assert emu.log_path.exists()
    finally:
        emu.stop()
    _assert_gone(emu.pid)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", emu.port), timeout=1).close()
    emu.stop()  # idempotent


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """PIDs of every emulator process started during the test."""
    pids: list[int] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)
        pids.append(proc.pid)
        return proc

    monkeypatch.setattr("adapters.local.emulators.subprocess.Popen", recording_popen)
    return pids


@needs_emulators
@pytest.mark.emulator
def test_not_ready_in_time_reports_log_and_cleans_up(spawned: list[int], tmp_path: Path) -> None:
    with pytest.raises(EmulatorStartError, match=r"not ready .* after 0.2 s. Log ") as err:
        start_emulator("pubsub", timeout=0.2, log_dir=tmp_path)  # a JVM needs over a second
    assert str(tmp_path) in str(err.value)
    assert len(spawned) == 1
    _assert_gone(spawned[0])


@needs_emulators
@pytest.mark.emulator
def test_set_stops_the_others_when_one_fails(spawned: list[int], tmp_path: Path) -> None:
    # Both start at once; pubsub's JVM is never ready in 0.3 s (0.62 s on a quiet machine,
    # where 0.6 s was once enough), bigtable may be (0.25 s): the set stops what started.
    emus = EmulatorSet(["bigtable", "pubsub"], timeout=0.3, log_dir=tmp_path)
    with pytest.raises(EmulatorStartError, match="not ready"):
        emus.start()
    assert emus.env == {}
    assert len(spawned) == 2
    for pid in spawned:
        _assert_gone(pid)


def test_emulator_set_env(emulators: EmulatorSet) -> None:
    env = emulators.env
    assert set(env) == {"PUBSUB_EMULATOR_HOST", "FIRESTORE_EMULATOR_HOST", "BIGTABLE_EMULATOR_HOST"}
    for address in env.values():
        host, port = address.split(":")
        assert host == "127.0.0.1"
        socket.create_connection((host, int(port)), timeout=1).close()
    assert len({a for a in env.values()}) == 3
    for key, value in env.items():
        assert os.environ[key] == value  # the session fixture exported them


def test_wipe_firestore(emulators: EmulatorSet, firestore_project: str) -> None:
    from google.cloud import firestore

    from adapters.local.emulators import wipe_firestore

    client = firestore.Client(project=firestore_project)
    try:
        doc = client.collection("runs").document("r1")
        doc.set({"state": "running"})
        assert doc.get().exists
        wipe_firestore(emulators.env["FIRESTORE_EMULATOR_HOST"], firestore_project)
        assert not doc.get().exists
    finally:
        client.close()
