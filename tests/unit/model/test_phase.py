"""Phases and statuses are enums in memory and the same strings in the stored documents
(`shared.model.phase`): every member equals its stored string, a stored run, setup and layer
(the canary's "" and "done" included) read into members and write back as the identical dict
of plain strings, and a string no build wrote is refused with the document named."""

from __future__ import annotations

import json

import pytest

from shared.model.phase import Phase, RunStatus, StoredStateError
from shared.model.state import JobKind, LayerState, RunState, SetupState, build_layers

STORED_PHASES = [
    (Phase.WAITING, "waiting"),
    (Phase.RUNNING, "running"),
    (Phase.SUCCEEDED, "succeeded"),
    (Phase.FAILED, "failed"),
]
STORED_STATUSES = [
    (RunStatus.RUNNING, "running"),
    (RunStatus.PAUSED, "paused"),
    (RunStatus.SUCCEEDED, "succeeded"),
    (RunStatus.FAILED, "failed"),
]
# The canary stores two phases under its own older names.
STORED_CANARY_PHASES = [
    (Phase.WAITING, ""),
    (Phase.RUNNING, "running"),
    (Phase.SUCCEEDED, "done"),
    (Phase.FAILED, "failed"),
]


@pytest.mark.parametrize(("member", "stored"), STORED_PHASES + STORED_STATUSES)
def test_each_member_is_its_stored_string(member, stored) -> None:
    assert member == stored and hash(member) == hash(stored)
    assert (json.dumps({"p": member}), f"{member}") == (json.dumps({"p": stored}), stored)


def test_the_enums_have_exactly_the_stored_values() -> None:
    assert [p.value for p in Phase] == [s for _, s in STORED_PHASES]
    assert [s.value for s in RunStatus] == [s for _, s in STORED_STATUSES]


@pytest.mark.parametrize(("layer_phase", "layer_stored"), STORED_PHASES)
@pytest.mark.parametrize(("canary_phase", "canary_stored"), STORED_CANARY_PHASES)
def test_a_layer_document_round_trips_to_the_identical_dict(
    layer_phase, layer_stored, canary_phase, canary_stored
) -> None:
    stored = {
        **LayerState("ingest", 2).to_doc(),
        "phase": layer_stored,
        "canary_phase": canary_stored,
    }
    ls = LayerState.from_doc(stored)
    assert ls.phase is layer_phase and ls.canary.phase is canary_phase
    doc = ls.to_doc()
    assert doc == stored and list(doc) == list(stored)
    # Plain strings, not members, go to Firestore.
    assert type(doc["phase"]) is str and type(doc["canary_phase"]) is str


def test_a_new_layer_stores_waiting_and_an_empty_canary_phase() -> None:
    doc = LayerState("ingest", 2).to_doc()
    assert (doc["phase"], doc["canary_phase"]) == ("waiting", "")


@pytest.mark.parametrize(("status", "status_stored"), STORED_STATUSES)
@pytest.mark.parametrize(("setup_phase", "setup_stored"), STORED_PHASES)
def test_a_run_document_round_trips_to_the_identical_dict(
    status, status_stored, setup_phase, setup_stored
) -> None:
    tops = {"ingest": 3}
    made = RunState("r1", "g", ["ingest"], tops, layers=build_layers(["ingest"], tops))
    made.setups["ingest"] = SetupState("ingest", job_name="job-setup")
    stored = made.run_doc()
    stored["status"] = status_stored
    stored["setups"]["ingest"]["phase"] = setup_stored
    run = RunState.from_docs(stored, [ls.to_doc() for ls in made.layers.values()])
    assert run.status is status and run.setups["ingest"].phase is setup_phase
    doc = run.run_doc()
    assert doc == stored and list(doc) == list(stored)
    assert type(doc["status"]) is str and type(doc["setups"]["ingest"]["phase"]) is str


@pytest.mark.parametrize(
    ("read", "doc", "named"),
    [
        (LayerState.from_doc, {"stage": "ingest", "layer": 3, "phase": "done"}, "layer ingest-L3"),
        (LayerState.from_doc, {"stage": "ingest", "layer": 3, "canary_phase": "succeeded"}, "L3"),
        (LayerState.from_doc, {"stage": "ingest", "layer": 3, "canary_phase": "waiting"}, "L3"),
        (SetupState.from_doc, {"stage": "mesh", "phase": "Running"}, "setup mesh"),
        (lambda d: RunState.from_docs(d, []), {"run_id": "r9", "status": "ended"}, "run r9"),
    ],
)
def test_a_stored_string_no_build_wrote_is_refused_naming_the_document(read, doc, named) -> None:
    base = {"run_id": "r9", "graph_id": "g", "stages": [], "top_layers": {}}
    with pytest.raises(StoredStateError, match=named):
        read({**base, **doc} if "run_id" in doc else doc)


def _run_with_jobs() -> RunState:
    tops = {"ingest": 3}
    run = RunState("r1", "g", ["ingest"], tops, layers=build_layers(["ingest"], tops))
    run.setups["ingest"] = SetupState("ingest", job_name="job-setup")
    run.layers["ingest-L2"].job.name = "job-2"
    run.layers["ingest-L2"].canary.job = "job-2-canary"
    run.layers["ingest-L3"].job.retire_job = "job-3-old"  # retired: named before, not listed
    return run


@pytest.mark.parametrize(
    ("kinds", "names"),
    [
        ((), ["job-setup", "job-2", "job-2-canary"]),
        ((JobKind.LAYER,), ["job-2"]),
        ((JobKind.CANARY,), ["job-2-canary"]),
        ((JobKind.SETUP,), ["job-setup"]),
        ((JobKind.SETUP, JobKind.CANARY), ["job-setup", "job-2-canary"]),
    ],
)
def test_job_names_lists_every_named_job_of_the_kinds_asked(kinds, names) -> None:
    assert _run_with_jobs().job_names(*kinds) == names


def test_a_run_before_any_job_names_none() -> None:
    tops = {"ingest": 3}
    run = RunState("r1", "g", ["ingest"], tops, layers=build_layers(["ingest"], tops))
    run.setups["ingest"] = SetupState("ingest")
    assert run.job_names() == []
