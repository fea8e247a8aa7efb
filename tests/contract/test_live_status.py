"""Live `pipeline status` as an operator runs it: a subprocess on a terminal (a pty), reading
the Firestore emulator. It ends by itself when the run ends, keeping the last screen, and
Ctrl-C leaves at once with exit 130 and no traceback, even while it waits on a gRPC call that
Firestore does not answer. (The hang this fixes, an interrupt that lands inside grpc's call
set-up so that the channel's close waits at interpreter shutdown for ever, is a race no test
can place; the command now leaves without the interpreter's shutdown, which covers it too.)

Timeouts below are failure conditions only (a command that hangs), never measurements.
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from shared.config.config_files import load_config
from shared.reconcile.build_plan import new_run
from tests.builders.demo_configs import with_batch
from tests.builders.stall_proxy import StallProxy
from tests.builders.terminal_session import TerminalSession

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo" / "pipeline.yml"
HANG = 60.0  # seconds: a command still there after this has hung


@pytest.fixture
def store(firestore_project: str) -> FirestoreRunStore:
    store = FirestoreRunStore(firestore_project)
    # At 32 chunks a pod, as when the full suite last passed: with the template's 128 the
    # Ctrl-C tests waited 60 s under the suite's load (not alone); followed up in issue 27.
    cfg = with_batch(load_config(DEMO))
    store.create_run(new_run(cfg, "r-live", ["ingest"], "auto", datetime.now(UTC)))
    return store


def _status(tmp_path: Path, project: str, firestore: str) -> TerminalSession:
    env = {
        **os.environ,
        "PIPELINE_PROJECT": project,
        "FIRESTORE_EMULATOR_HOST": firestore,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = ["-m", "scripts.cli", "status", "r-live", "--interval", "0.1"]
    return TerminalSession(cmd, env=env, cwd=tmp_path)  # cwd: no local stack there


def test_live_status_ends_with_the_run_and_keeps_the_last_screen(store, tmp_path, emulators):
    with _status(tmp_path, store.db.project, emulators.env["FIRESTORE_EMULATOR_HOST"]) as term:
        term.wait_for("· running ·", HANG)
        store.update_run("r-live", lambda run: setattr(run, "status", "succeeded"))
        code = term.wait(HANG)
    assert code == 0, term.screen()
    last = term.screen()
    assert "· succeeded ·" in last and "ingest-L2" in last  # the final table stays
    assert "Traceback" not in last


def test_ctrl_c_says_the_build_goes_on_and_how_to_come_back(store, tmp_path, emulators):
    with _status(tmp_path, store.db.project, emulators.env["FIRESTORE_EMULATOR_HOST"]) as term:
        term.wait_for("· running ·", HANG)
        term.send_signal(signal.SIGINT)
        code = term.wait(HANG)
    out = term.screen()
    assert code == 130, out
    said = "interrupted: the build goes on; `pipeline status r-live` comes back to it"
    assert said in out and "Traceback" not in out
    assert store.load_run("r-live").status == "running"  # nothing was changed


def test_ctrl_c_in_the_middle_of_a_grpc_call_leaves_at_once(store, tmp_path, emulators):
    with StallProxy(emulators.env["FIRESTORE_EMULATOR_HOST"]) as proxy:
        with _status(tmp_path, store.db.project, proxy.address) as term:
            term.wait_for("· running ·", HANG)
            proxy.freeze()  # Firestore stops answering: the next refresh waits on its call
            assert proxy.held.wait(HANG), "status made no call after the freeze"
            term.send_signal(signal.SIGINT)
            code = term.wait(HANG)
    out = term.screen()
    assert code == 130, out
    assert "interrupted" in out and "Traceback" not in out
