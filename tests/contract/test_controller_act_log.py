"""What the controller's act step tells the operator (the `cave_pipeline.controller` log,
one JSON object a line), and that a reconcile whose commit went through is not retried: on
the Firestore emulator with the recording cluster (docs/testing-mutation.md)."""

from __future__ import annotations

import json
import logging

from shared.control.controller import Controller
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import NOW


def _records(caplog) -> list[dict]:
    return [
        json.loads(r.getMessage()) for r in caplog.records if r.name == "cave_pipeline.controller"
    ]


def test_a_created_job_is_logged_once_and_a_job_found_existing_is_a_warning(store, run, caplog):
    caplog.set_level(logging.INFO, logger="cave_pipeline.controller")
    cluster = RecordingCluster()
    result = Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconcile("r1")
    assert result.stale_retries == 0  # the commit went through: decided once
    job = store.load_run("r1").layers["ingest-L2"].job.name
    created = [r for r in _records(caplog) if r.get("job") == job]
    assert created == [
        {
            "severity": "INFO",
            "message": "job created",
            "run": "r1",
            "stage": "ingest",
            "layer": 2,
            "job": job,
        }
    ]
    # The same Job created again (e.g. a redelivered event after a lost commit): adopted,
    # and said so.
    caplog.clear()
    Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconciler.act(
        _decision_creating(store, cluster, job), {job: cluster.manifests[job]}
    )
    assert [r for r in _records(caplog) if r.get("job") == job] == [
        {
            "severity": "WARNING",
            "message": "job exists",
            "run": "r1",
            "stage": "ingest",
            "layer": 2,
            "job": job,
        }
    ]


def _decision_creating(store, cluster, job):
    from shared.reconcile.decision import CreateJob, Decision

    state = store.load_run("r1")
    ls = state.layers["ingest-L2"]
    return Decision(state=state, actions=[CreateJob("ingest", 2, job, ls.job.parallelism)], at=NOW)


def test_a_resize_is_sent_to_the_cluster_and_its_outcome_logged(store, run, caplog):
    """A ResizePod goes to the cluster's resize_pod; a refused one is logged as unsupported,
    with what happens instead (docs/cli.md#steering-a-build)."""
    from shared.ports.cluster import ResizeOutcome
    from shared.reconcile.decision import Decision, ResizePod

    caplog.set_level(logging.INFO, logger="cave_pipeline.controller")
    cluster = RecordingCluster()
    act = Controller(store, cluster, lambda *a: None, clock=lambda: NOW).reconciler.act
    new = {"requests": {"cpu": "2", "memory": "4Gi"}}
    state = store.load_run("r1")
    act(Decision(state, [ResizePod("j", "p-a", "worker", new)], NOW), {})
    cluster.resize_answer = ResizeOutcome.UNSUPPORTED
    act(Decision(state, [ResizePod("j", "p-b", "worker", new)], NOW), {})
    assert cluster.resizes == [("p-a", "worker", new), ("p-b", "worker", new)]
    logged = [(r["message"], r["pod"], r["then"]) for r in _records(caplog) if "pod" in r]
    assert logged == [
        ("pod resized in place", "p-a", ""),
        ("pod resize unsupported", "p-b", "the layer's next attempt gets the new requests"),
    ]
