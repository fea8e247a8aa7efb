"""The Firestore run store against the emulator (the controller on it: test_controller.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.adapters.google.firestore_store import FirestoreRunStore
from shared.build_plan import new_run
from shared.config import load_config
from shared.run_store import RunExistsError, RunNotFoundError, StaleStateError

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def store(firestore_project: str) -> FirestoreRunStore:
    return FirestoreRunStore(firestore_project)


@pytest.fixture
def run(store: FirestoreRunStore):
    cfg = load_config(DEMO)
    state = new_run(cfg, "r1", ["ingest"], "auto", NOW)
    store.create_run(state)
    return state


def test_create_load_roundtrip(store, run):
    loaded = store.load_run("r1")
    assert loaded.run_doc() == run.run_doc()
    assert {k: v.to_doc() for k, v in loaded.layers.items()} == {
        k: v.to_doc() for k, v in run.layers.items()
    }
    with pytest.raises(RunExistsError, match="already exists"):
        store.create_run(run)
    with pytest.raises(RunNotFoundError, match="pipeline runs"):
        store.load_run("nope")


def test_commit_requires_the_version_it_read(store, run):
    before = store.load_run("r1")
    after = store.load_run("r1")
    after.layers["ingest-L2"].phase = "running"
    after.layers["ingest-L2"].job_name = "job-a"
    store.commit(before, after, [{"kind": "approval_needed", "x": 1}])
    assert store.load_run("r1").version == 1
    assert store.run_for_job("job-a") == "r1"
    assert [a.kind for a in store.unsent_alerts("r1")] == ["approval_needed"]
    with pytest.raises(StaleStateError):
        store.commit(before, after)  # the same stale read again


def test_alert_outbox_marked_sent(store, run):
    before = store.load_run("r1")
    store.commit(before, store.load_run("r1"), [{"kind": "a"}, {"kind": "b"}])
    alerts = store.unsent_alerts("r1")
    store.mark_alerts_sent("r1", [alerts[0].alert_id])
    assert [a.kind for a in store.unsent_alerts("r1")] == [alerts[1].kind]


def test_dedupe_first_sighting(store):
    expires = NOW + timedelta(hours=1)
    assert store.first_sighting("evt-1", expires) is True
    assert store.first_sighting("evt-1", expires) is False
    assert store.first_sighting("evt-2", expires) is True


def test_active_runs_and_list(store, run):
    assert store.active_runs() == ["r1"]
    store.update_run("r1", lambda r: setattr(r, "status", "succeeded"))
    assert store.active_runs() == []
    assert [r.run_id for r in store.list_runs()] == ["r1"]
