"""Behaviour of `shared.model.state` and `shared.model.intervals` that the mutation run found
unchecked (issue 9): documents read back whatever extra keys they carry, build order, when a stage's
first layer became ready, and empty parts of an interval string."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.model import intervals
from shared.model.state import LayerState, PodUsage, RunState, build_layers

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_run(stages: list[str], top: int = 3) -> RunState:
    tops = {s: top for s in stages}
    return RunState("r1", "g", stages, tops, created_at=T0, layers=build_layers(stages, tops))


def test_a_layer_document_reads_back_and_ignores_fields_it_does_not_know() -> None:
    ls = LayerState("ingest", 3, phase="running", pods=PodUsage(cpu_seconds=4.5, open=["k"]))
    assert LayerState.from_doc({**ls.to_doc(), "dropped_field": 1}) == ls


def test_a_run_reads_back_from_its_documents_and_ignores_unknown_fields() -> None:
    run = make_run(["ingest", "meshing"])
    run.layers["ingest-L2"].phase = "succeeded"
    docs = [{**ls.to_doc(), "old": True} for ls in run.layers.values()]
    back = RunState.from_docs({**run.run_doc(), "dropped_field": 1}, docs)
    assert back == run


def test_a_run_document_never_carries_its_layers() -> None:
    run = make_run(["ingest"])
    back = RunState.from_docs({**run.run_doc(), "layers": {"x": 1}}, [])
    assert back.layers == {}


def test_layers_are_in_build_order_and_a_stage_outside_the_run_comes_last() -> None:
    run = make_run(["ingest", "meshing"], top=3)
    stray = LayerState("l2cache", 2)
    run.layers[stray.key] = stray
    keys = [ls.key for ls in run.ordered_layers()]
    assert keys == ["ingest-L2", "ingest-L3", "meshing-L2", "meshing-L3", "l2cache-L2"]


@pytest.mark.parametrize(
    ("stages", "ingest_top_finished_s", "want"),
    [
        (["ingest", "meshing"], None, None),  # its dependency has not finished
        (["ingest", "meshing"], 40, T0 + timedelta(seconds=40)),  # when it finished
        (["meshing"], None, T0),  # no dependency in the run: when the run was created
    ],
)
def test_a_stages_first_layer_is_ready_when_its_dependencies_finished(
    stages, ingest_top_finished_s, want
) -> None:
    run = make_run(stages)
    if ingest_top_finished_s is not None:
        ls = run.layers["ingest-L3"]
        ls.phase, ls.timing.finished_at = "succeeded", T0 + timedelta(seconds=ingest_top_finished_s)
    assert run.ready_since(run.layers["meshing-L2"]) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [("1,,3", [1, 3]), (",2", [2]), ("4, ,5-6,", [4, 5, 6]), ("", [])],
)
def test_empty_parts_of_an_interval_string_are_skipped(text, want) -> None:
    assert intervals.parse(text) == want
