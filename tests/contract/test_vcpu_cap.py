"""`controller.max_vcpus` across runs, on the Firestore emulator: the controller reads what
the project's other running runs hold (stored parallelism x vCPU) and starts a run's layer
only within what is left of the cap."""

from __future__ import annotations

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import DEMO, NOW

HELD = 3 * 0.25  # the other run's running layer: 3 pods of 0.25 vCPU


def _store_runs(store: FirestoreRunStore, max_vcpus: float) -> None:
    base = load_config(DEMO)
    controller = base.controller.model_copy(update={"max_vcpus": max_vcpus})
    cfg = base.model_copy(update={"controller": controller})
    busy = new_run(cfg, "busy", ["ingest"], "auto", NOW)
    ls = busy.layers["ingest-L2"]
    ls.phase, ls.job.parallelism, ls.pods.cpu_request, ls.job.name = "running", 3, 0.25, "busy-job"
    store.create_run(busy)
    fresh = new_run(cfg, "new", ["ingest"], "auto", NOW)
    fresh.setups.clear()  # its layer 2 may start now: only the cap can hold it back
    store.create_run(fresh)


@pytest.mark.parametrize(
    ("max_vcpus", "want"),
    [
        (10.0, 2),  # room: the ramp's start (2 pods)
        (HELD + 0.25, 1),  # room for one 0.25 vCPU pod
        (HELD, None),  # none left: the layer waits, no Job
    ],
)
def test_a_layer_starts_within_what_other_runs_leave_of_the_cap(firestore_project, max_vcpus, want):
    store = FirestoreRunStore(firestore_project)
    _store_runs(store, max_vcpus)
    cluster = RecordingCluster()
    Controller(store, cluster, lambda k, b: None, clock=lambda: NOW).reconcile("new")
    ls = store.load_run("new").layers["ingest-L2"]
    if want is None:
        assert ls.phase == "waiting" and cluster.creates == []
    else:
        assert (ls.phase, ls.job.parallelism) == ("running", want)
        manifest = cluster.manifests[cluster.creates[0]]
        assert manifest["spec"]["parallelism"] == want
