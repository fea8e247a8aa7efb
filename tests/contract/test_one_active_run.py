"""`pipeline start` keeps one active run per graph (scripts/commands/run.py, the guard in
shared/operate/operator_actions.py): the runs of the graph are read from the Firestore emulator, a
second active run is refused naming the first and `--force`, and `--force` is recorded on the
new run's document."""

from __future__ import annotations

from adapters.google.firestore_store import FirestoreRunStore
from tests.builders.stored_runs import DEMO

# The preflight is test_doctor_local's: examples/demo leaves its watershed to `pipeline demo`.
START = ("start", "-c", str(DEMO), "--no-preflight")


def test_a_second_active_run_of_the_graph_is_refused_then_forced(cli, firestore_project):
    store = FirestoreRunStore(firestore_project)
    first = cli(*START, "--run-id", "first")
    assert first.exit_code == 0, first.output
    second = cli(*START, "--run-id", "second")
    assert second.exit_code == 2  # a refused action: docs/cli.md#exit-codes
    assert second.stderr.startswith("error: graph demo already has an active run: first")
    assert "--force" in second.output
    # every way out it names is a command that exists
    assert "`pipeline pause first`" in second.output and "`pipeline purge first`" in second.output
    assert "cancel" not in second.output
    assert [r.run_id for r in store.runs_of_graph(store.load_run("first").graph_id)] == ["first"]
    forced = cli(*START, "--run-id", "second", "--force", "--reason", "rerun")
    assert forced.exit_code == 0, forced.output
    doc = store.load_run("second").forced_start
    assert doc["by"] == "alice" and doc["why"] == "rerun" and doc["past_runs"] == ["first"]
    assert doc["at"] is not None
    assert store.load_run("first").forced_start == {}


def test_a_finished_run_of_the_graph_does_not_block_a_new_one(cli, firestore_project):
    store = FirestoreRunStore(firestore_project)
    assert cli(*START, "--run-id", "old").exit_code == 0

    def finish(run):  # noqa: ANN001, ANN202
        run.status = "failed"

    store.update_run("old", finish)
    again = cli(*START, "--run-id", "new")
    assert again.exit_code == 0, again.output
    assert store.load_run("new").forced_start == {}
