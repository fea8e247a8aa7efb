"""The root layer's check (shared.reconcile.root_check): PyChunkedGraph's ingest harness runs
the graph's tests after the root chunk is marked done and exits 42 when they fail, so a root
layer that failed with every marker written is reported as the check failing: by the
controller (the layer's reason, a `root_check_failed` alert, not `layer_failed`), by
`pipeline verify` (not complete), and a re-submit starts a fresh attempt that re-runs it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from shared.config.config_files import load_config
from shared.model.state import RunState
from shared.operate.operator_actions import resubmit
from shared.reconcile.completeness import (
    LayerGrid,
    StageVerdict,
    marker_coverage,
    root_check_failures,
    run_complete,
    verify_layer,
)
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, Snapshot
from shared.reconcile.root_check import runs_root_check
from tests.builders.decide_runs import job, make_run, name_for, plans
from tests.builders.stored_runs import DEMO

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PCG_INGEST = ["python", "-m", "pychunkedgraph.pipeline.ingest"]
ROOT = LayerGrid("ingest", 4, (1, 1, 1), 4, 10)  # the root layer: one chunk


@pytest.mark.parametrize(
    ("commands", "stage", "layer", "runs"),
    [
        ({"ingest": PCG_INGEST}, "ingest", "root", True),
        ({"ingest": PCG_INGEST}, "ingest", "below", False),  # only at the root
        ({}, "ingest", "root", False),  # our worker's ingest: no such check
        ({"ingest": ["python", "-m", "worker"]}, "ingest", "root", False),
        (
            {"meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"]},
            "meshing",
            "root",
            False,
        ),
    ],
)
def test_which_layers_run_the_root_check(commands, stage, layer, runs):
    cfg = load_config(DEMO)
    cfg = cfg.model_copy(update={"commands": commands})
    from shared.config.stage_selection import top_layer

    top = top_layer(cfg, "ingest")
    assert runs_root_check(cfg, stage, top if layer == "root" else top - 1) is runs


def _failed_root(run: RunState, marked: int):
    root = run.layers["ingest-L4"]
    root.phase, root.job.name, root.job.completions = "running", name_for(root), 1
    failed = job(
        root.job.name,
        completions=1,
        condition="Failed",
        reason="FailedIndexes",
        failed_indexes="0",
    )
    ids = np.array([ROOT.chunk_id(0)] if marked else [], np.uint64)
    return root, failed, verify_layer(ROOT, ids)


@pytest.mark.parametrize(
    ("marked", "root_check", "kind", "flagged"),
    [
        (1, True, "root_check_failed", True),  # built and marked: the check failed
        (0, True, "layer_failed", False),  # the chunk itself failed (never marked done)
        (1, False, "layer_failed", False),  # a layer without the check: the Job decides
    ],
)
def test_a_failed_root_layer_with_its_markers_is_the_check_failing(
    marked, root_check, kind, flagged
):
    run = make_run()
    for ls in run.layers.values():
        if ls.layer < 4:
            ls.phase = "succeeded"
    root, failed, verdict = _failed_root(run, marked)
    plan = plans(run, completions=1)
    plan.layers["ingest-L4"] = replace(plan.layers["ingest-L4"], root_check=root_check)
    seen = Snapshot(run, {root.job.name: failed}, ledger_checks={"ingest-L4": verdict})
    decision = decide(seen, plan, None, NOW)
    after = decision.state.layers["ingest-L4"]
    assert after.phase == "failed" and after.root_check_failed is flagged
    alerts = [a for a in decision.actions if isinstance(a, Alert) and a.layer == 4]
    # the root check's alert alone: its failed index is no chunk's
    want = [kind] if flagged else ["failed_indexes", kind]
    assert [a.kind for a in alerts] == want
    if flagged:
        assert after.failure_reason.startswith("root check failed: the root chunk is built")
        assert "pipeline submit r1 ingest 4` re-runs only the check" in after.failure_reason
        assert alerts[0].details["chunks_marked"] == 1
        assert "re-runs only the check" in alerts[0].details["fix"]
        # `pipeline verify`: complete markers, yet not a complete run
        stage = StageVerdict("ingest", marker_coverage(load_config(DEMO), "ingest"), (verdict,))
        assert verdict.complete and not run_complete(decision.state, {"ingest": stage})
        assert root_check_failures(decision.state, {"ingest": stage}) == [verdict]
        # a re-submit is a fresh attempt: the check runs again, the flag is gone
        attempt = after.job.attempt
        resubmit(decision.state, "ingest", 4, "ana", NOW)
        assert decision.state.layers["ingest-L4"].root_check_failed is False
        assert decision.state.layers["ingest-L4"].job.attempt == attempt + 1


def _earlier(run_id: str, created: int, root_failed: bool, phase: str = "failed") -> RunState:
    from datetime import timedelta

    from shared.reconcile.build_plan import new_run

    cfg = load_config(DEMO)
    earlier = new_run(cfg, run_id, ["ingest"], "auto", NOW + timedelta(hours=created))
    root = earlier.layers[f"ingest-L{earlier.top_layers['ingest']}"]
    root.phase, root.root_check_failed = ("failed", True) if root_failed else (phase, False)
    return earlier


@pytest.mark.parametrize(
    ("stages", "earlier", "force", "refused"),
    [
        (["meshing"], [_earlier("a", 1, True)], False, True),
        (["meshing"], [_earlier("a", 1, True)], True, False),  # --force
        (["l2cache"], [_earlier("a", 1, True)], False, True),
        # a later run passed the check (its root layer succeeded): the graph is built
        (["meshing"], [_earlier("a", 1, True), _earlier("b", 2, False, "succeeded")], False, False),
        # the failed check is the newest word
        (["meshing"], [_earlier("b", 1, False, "succeeded"), _earlier("a", 2, True)], False, True),
        (["ingest", "meshing"], [_earlier("a", 1, True)], False, False),  # builds ingest itself
        (["migrate"], [_earlier("a", 1, True)], False, False),  # does not build on ingest
        (["meshing"], [_earlier("a", 1, False, "running")], False, False),  # no root verdict
    ],
)
def test_a_start_on_a_graph_whose_root_check_failed_says_so(stages, earlier, force, refused):
    from shared.operate.start_from import RootCheckFailedError, check_root_check
    from shared.reconcile.build_plan import new_run

    cfg = load_config(DEMO)
    run = (
        new_run(cfg, "new", stages, "auto", NOW)
        if "migrate" not in stages
        else RunState("new", "g", stages, {"migrate": 5}, "auto")
    )
    if refused:
        with pytest.raises(RootCheckFailedError, match="failed the root check") as err:
            check_root_check(run, earlier, force)
        assert "pipeline submit a ingest 5" in str(err.value) and "--force" in str(err.value)
    else:
        check_root_check(run, earlier, force)
