"""`pipeline start --from-layer` (shared/operate/start_from.py): which stage starts where, the
refusal when the layer below is not complete, and the layers recorded as built before."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config.config_files import load_config
from shared.operate.operator_actions import ActionError
from shared.operate.start_from import (
    LayerNotDoneError,
    check_layer_done,
    layer_chunk_ids,
    skip_below,
    start_layers,
)
from shared.reconcile.build_plan import new_run, plan_for
from shared.reconcile.decide import decide
from shared.reconcile.decision import CreateJob, Snapshot
from tests.builders.stored_runs import NOW

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
CFG = load_config(DEMO)


def run_of(stages: list[str], start: dict[str, int] | None = None):
    cfg = CFG.model_copy(update={"start_layers": start or {}})
    return cfg, new_run(cfg, "r1", stages, "auto", NOW)


@pytest.mark.parametrize(
    ("stages", "cfg_start", "stage", "layer", "want"),
    [
        (["ingest"], None, None, 3, {"ingest": 3}),  # the run's first stage
        (["ingest"], None, None, 2, {}),  # layer 2: nothing to skip
        (["ingest"], {"ingest": 4}, None, None, {"ingest": 4}),  # from the config
        (["ingest"], {"ingest": 4}, "ingest", 3, {"ingest": 3}),  # the option wins
        (["ingest"], {"meshing": 3}, None, None, {}),  # not a stage of this run
        (["meshing"], None, "meshing", 3, {"meshing": 3}),
    ],
)
def test_start_layers(stages, cfg_start, stage, layer, want):
    cfg, run = run_of(stages, cfg_start)
    assert start_layers(cfg, run, stage, layer) == want


@pytest.mark.parametrize(
    ("stages", "stage", "layer", "error"),
    [
        (["ingest"], None, 9, "ingest has layers 2..5"),
        (["ingest"], "meshing", 3, "not a stage of this run"),
        (["ingest", "meshing"], "meshing", 3, "start it with --stages meshing"),
        (["ingest"], "ingest", None, "--from-layer"),
    ],
)
def test_start_layers_refusals(stages, stage, layer, error):
    cfg, run = run_of(stages)
    with pytest.raises(ActionError, match=error):
        start_layers(cfg, run, stage, layer)


def test_every_chunk_of_a_layer_is_listed_once():
    ids = list(layer_chunk_ids(CFG, "ingest", 2))
    assert len(ids) == len(set(ids)) == 512  # the example demo config: 8x8x8 at layer 2
    assert all(i >> 56 == 2 for i in ids)  # the layer id in the top 8 bits
    assert len(list(layer_chunk_ids(CFG, "ingest", 3))) == 64


def test_a_layer_with_missing_chunks_refuses_naming_how_many_and_some():
    check_layer_done("ingest", 2, 64, [])  # complete: passes
    with pytest.raises(LayerNotDoneError) as e:
        check_layer_done("ingest", 2, 64, list(range(100, 110)))
    msg = str(e.value)
    assert "10 of 64 chunks of ingest layer 2 are not marked done" in msg
    assert "100, 101, 102, 103, 104)" in msg and "105" not in msg


def test_skipped_layers_are_done_before_and_the_run_starts_at_the_layer():
    _, run = run_of(["ingest"])
    assert skip_below(run, "ingest", 4, "op", NOW) == ["ingest-L2", "ingest-L3"]
    assert all(run.layers[k].done_before for k in ("ingest-L2", "ingest-L3"))
    assert not run.layers["ingest-L4"].done_before
    d = decide(Snapshot(run), plan_for(CFG, run), None, NOW)
    creates = [a for a in d.actions if isinstance(a, CreateJob)]
    assert [(c.stage, c.layer) for c in creates] == [("ingest", 4)]  # no setup pass
    assert "ingest" not in run.setups
