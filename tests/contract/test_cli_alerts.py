"""`pipeline alerts` on the Firestore emulator: the alerts a real reconcile put in a run's
outbox, newest last with their fixes; --kind, --json; --follow printing the alerts raised
while it runs and ending with the run."""

from __future__ import annotations

import json
import threading
import time

from shared.control.controller import Controller
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import NOW


def _failed_layer(store) -> None:
    """r1's layer 2 started, one index failed, then its Job failed: two alerts published."""
    cluster = RecordingCluster()
    controller = Controller(store, cluster, lambda *a: None, clock=lambda: NOW)
    controller.reconcile("r1")
    job = store.load_run("r1").layers["ingest-L2"].job.name
    cluster.finish(job, failed_indexes="1")
    controller.reconcile("r1")
    cluster.finish(job, condition="Failed", reason="BackoffLimitExceeded")
    controller.reconcile("r1")


def test_lists_the_runs_alerts_newest_last_with_their_fix(store, run, cli):
    _failed_layer(store)
    result = cli("alerts", "r1")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 2
    assert "notify  failed_indexes run r1 ingest layer 2: 1 indexes failed (1)" in lines[0]
    assert "page    layer_failed run r1 ingest layer 2: BackoffLimitExceeded" in lines[1]
    assert lines[1].endswith("->  pipeline inspect r1 ingest 2")
    # Without RUN: the newest run (the only one here).
    assert cli("alerts").output == result.output


def test_kind_and_json(store, run, cli):
    _failed_layer(store)
    result = cli("alerts", "r1", "--kind", "layer_failed", "--json")
    assert result.exit_code == 0, result.output
    [doc] = [json.loads(line) for line in result.output.splitlines()]
    assert doc["kind"] == "layer_failed" and doc["severity"] == "page" and doc["sent"]
    assert doc["fix"] == "pipeline inspect r1 ingest 2"
    assert cli("alerts", "r1", "--kind", "run_finished").output == (
        "no alerts for run r1 of kind run_finished\n"
    )
    assert cli("alerts", "r1", "--kind", "made_up").exit_code == 2


def test_an_unknown_run_is_an_error(store, run, cli):
    result = cli("alerts", "nope")
    assert result.exit_code != 0 and "nope" in result.output


def test_follow_prints_new_alerts_and_ends_with_the_run(store, run, cli):
    ending = threading.Event()  # set just before the run ends (after it, it could race)

    def later() -> None:
        time.sleep(1.0)
        _failed_layer(store)
        time.sleep(1.0)
        ending.set()
        store.update_run("r1", lambda r: setattr(r, "status", "failed"))

    writer = threading.Thread(target=later)
    writer.start()
    result = cli("alerts", "r1", "--follow", "-i", "0.2")
    assert ending.is_set()  # it waited for the run to end
    writer.join(30)
    assert result.exit_code == 0, result.output
    kinds = [line.split()[3] for line in result.output.splitlines()]
    assert kinds == ["failed_indexes", "layer_failed"]
