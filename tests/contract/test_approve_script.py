"""scripts/approve.py against the Firestore emulator: sets flags, refuses what isn't there."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from scripts.approve import main as approve_main
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import RecordingCluster

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"


@pytest.fixture
def store(firestore_project):
    store = FirestoreRunStore(firestore_project)
    store.create_run(new_run(load_config(DEMO), "r-ap", ["ingest"], "approve", datetime.now(UTC)))
    return store


def test_approve_all_waiting_layers_ahead(store, capsys):
    assert approve_main(["--project", store.db.project, "--by", "ana", "r-ap", "ingest"]) == 0
    run = store.load_run("r-ap")
    assert all(ls.approval.granted and ls.approval.by == "ana" for ls in run.layers.values())
    assert run.version == 1
    # The controller now advances without an operator.
    cluster = RecordingCluster()
    Controller(store, cluster, lambda *a: None).reconcile("r-ap")
    assert len(cluster.creates) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "ingest"], "no run 'nope'"),
        (["r-ap", "meshing"], "no stage 'meshing'"),
        (["r-ap", "ingest", "9"], "no layer [9]"),
    ],
)
def test_refuses_what_does_not_exist(store, capsys, args, message):
    assert approve_main(["--project", store.db.project, *args]) == 2
    assert message in capsys.readouterr().err
    assert store.load_run("r-ap").version == 0
