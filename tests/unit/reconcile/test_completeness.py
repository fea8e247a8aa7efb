"""The completeness check's pure part: expected chunks per layer, the comparison with the done
ids, the missing intervals, which stages can be checked, and what a reconcile makes of it."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from shared.config.config_files import load_config
from shared.model import intervals
from shared.model.layers import chunk_id
from shared.model.state import LayerState, Timing
from shared.reconcile.build_plan import new_run
from shared.reconcile.completeness import (
    MAX_EXAMPLES,
    MAX_RANGES,
    Coverage,
    LayerGrid,
    LayerVerdict,
    MissingChunk,
    StageVerdict,
    incomplete_details,
    incomplete_reason,
    layer_grid,
    marker_coverage,
    run_complete,
    run_verdict,
    verify_layer,
    verify_run,
    verify_stage,
)
from shared.reconcile.decision import Alert
from shared.reconcile.hung_pods import plan_batch, window_chunk_ids
from shared.reconcile.layer_verify import apply_ledger_check
from tests.builders.pod_infos import T0
from tests.builders.stored_runs import DEMO

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GRID = LayerGrid("ingest", 3, (4, 3, 2), 6, 10)  # 24 chunks, n_layers 6


def _ids(grid: LayerGrid, positions) -> np.ndarray:
    return np.array([grid.chunk_id(p) for p in positions], dtype=np.uint64)


def test_chunk_ids_follow_pychunkedgraph_and_c_order():
    # Position p of the grid is (x, y, z) in C order, its id the layers module's.
    for p in range(GRID.chunks):
        x, y, z = GRID.coord(p)
        assert (x * 3 + y) * 2 + z == p
        assert GRID.chunk_id(p) == chunk_id(3, (x, y, z), 6, 10)
        # PyChunkedGraph's layout: layer in the top 8 bits, then x, y, z of 3 bits each.
        assert GRID.chunk_id(p) == (3 << 56) | (x << 53) | (y << 50) | (z << 47)


@pytest.mark.parametrize(
    ("marked", "missing", "ranges", "count"),
    [
        (range(24), [], "", 0),
        ([p for p in range(24) if p not in (0, 5, 6, 7, 23)], [0, 5, 6, 7, 23], "0,5-7,23", 3),
        ([], list(range(24)), "0-23", 1),
        (range(1, 24, 2), list(range(0, 24, 2)), intervals.format(range(0, 24, 2)), 12),
    ],
)
def test_verify_layer_counts_and_names_the_missing(marked, missing, ranges, count):
    v = verify_layer(GRID, _ids(GRID, marked))
    assert (v.chunks_expected, v.chunks_marked, v.chunks_missing) == (
        24,
        24 - len(missing),
        len(missing),
    )
    assert v.complete is (not missing)
    assert (v.missing_ranges, v.missing_range_count) == (ranges, count)
    assert [m.position for m in v.examples] == missing[:MAX_EXAMPLES]
    for m in v.examples:
        assert m.coord == GRID.coord(m.position) and m.chunk_id == GRID.chunk_id(m.position)


@pytest.mark.parametrize(
    ("extra", "outside"),
    [
        ([chunk_id(2, (0, 0, 0), 6, 10), chunk_id(4, (0, 0, 0), 6, 10)], 0),  # other layers
        ([chunk_id(3, (4, 0, 0), 6, 10), chunk_id(3, (0, 0, 2), 6, 10)], 2),  # past the grid
    ],
)
def test_other_layers_are_ignored_and_strays_counted(extra, outside):
    ids = np.concatenate([_ids(GRID, range(1, 24)), np.array(extra, dtype=np.uint64)])
    v = verify_layer(GRID, ids)
    assert (v.chunks_marked, v.missing_ranges, v.outside_grid) == (23, "0", outside)


def test_duplicate_ids_count_once():
    v = verify_layer(GRID, np.concatenate([_ids(GRID, range(24))] * 2))
    assert v.complete and v.chunks_marked == 24


def test_missing_intervals_are_bounded():
    grid = LayerGrid("ingest", 2, (10, 10, 10), 6, 10)
    v = verify_layer(grid, _ids(grid, range(0, 1000, 2)))  # 500 single gaps
    assert v.missing_range_count == 500
    assert len(v.missing_ranges.split(",")) == MAX_RANGES
    assert len(v.examples) == MAX_EXAMPLES and v.chunks_missing == 500


def _cfg(**changes):
    cfg = load_config(DEMO)
    return cfg.model_copy(update=changes)


@pytest.mark.parametrize(
    ("commands", "stage", "checkable"),
    [
        ({}, "ingest", True),  # the worker runs the workloads plugin
        ({}, "meshing", True),
        ({"meshing": ["python", "-m", "worker"]}, "meshing", True),
        ({"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]}, "ingest", True),
        ({"meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"]}, "meshing", False),
        ({"l2cache": ["python", "-m", "pcgl2cache.pipeline.l2cache"]}, "l2cache", False),
        ({"migrate": ["python", "-m", "pychunkedgraph.pipeline.migrate"]}, "migrate", False),
    ],
)
def test_which_stages_write_done_markers(commands, stage, checkable):
    coverage = marker_coverage(_cfg(commands=commands), stage)
    assert coverage.checkable is checkable
    assert ("writes no done markers" in coverage.why) is (not checkable)


def test_layer_grid_is_the_planned_grid():
    cfg = _cfg()
    grid = layer_grid(cfg, "ingest", 2)
    assert grid.shape == (8, 8, 8) and grid.bits == 10
    assert layer_grid(cfg, "ingest", 3).shape == (4, 4, 4)


def _layer(phase="succeeded") -> LayerState:
    return LayerState("ingest", 3, phase=phase, timing=Timing(finished_at=NOW))


@pytest.mark.parametrize(
    ("marked", "phase", "chunks_marked", "alerted"),
    [
        (range(24), "succeeded", 24, False),
        (range(1, 24), "failed", 23, True),
    ],
)
def test_apply_ledger_check(marked, phase, chunks_marked, alerted):
    ls, out = _layer(), []
    apply_ledger_check("r1", ls, verify_layer(GRID, _ids(GRID, marked)), NOW, out)
    assert (ls.phase, ls.progress.chunks_marked) == (phase, chunks_marked)
    assert bool(out) is alerted
    if alerted:
        [alert] = out
        assert isinstance(alert, Alert) and alert.kind == "layer_incomplete"
        assert (alert.stage, alert.layer) == ("ingest", 3)
        assert alert.details["missing_positions"] == "0"
        assert alert.details["missing_examples"][0]["coord"] == [0, 0, 0]
        assert "pipeline verify r1 --stage ingest" in ls.failure_reason
        assert "pipeline submit r1 ingest 3" in ls.failure_reason


@pytest.mark.parametrize("phase", ["running", "failed"])
def test_no_verdict_or_unfinished_layer_is_left_alone(phase):
    ls, out = _layer(phase), []
    apply_ledger_check("r1", ls, verify_layer(GRID, _ids(GRID, [])), NOW, out)
    assert (ls.phase, ls.progress.chunks_marked, out) == (phase, None, [])
    ls = _layer()
    apply_ledger_check("r1", ls, None, NOW, out)
    assert (ls.phase, ls.progress.chunks_marked, out) == ("succeeded", None, [])


def _demo_run(cfg, stages):
    return new_run(cfg, "r1", stages, "auto", NOW)


def test_verify_run_reads_each_checkable_stage_once():
    cfg = _cfg(commands={"meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"]})
    run = _demo_run(cfg, ["ingest", "meshing"])
    l2 = layer_grid(cfg, "ingest", 2)
    reads = []

    def scan(_cfg, stage):
        reads.append(stage)
        return _ids(l2, range(1, l2.chunks))  # layer 2 lacks position 0, the rest nothing

    verdicts = verify_run(cfg, run, scan)
    assert reads == ["ingest"]
    ingest, meshing = verdicts["ingest"], verdicts["meshing"]
    assert ingest.layers[0].chunks_missing == 1 and ingest.complete is False
    assert ingest.chunks_marked == l2.chunks - 1
    assert meshing.complete is None and meshing.chunks_marked is None and meshing.layers == ()
    # Nothing is built yet: an incomplete ledger is no finding.
    assert run_complete(run, verdicts)
    run.layers["ingest-L2"].phase = "succeeded"
    assert not run_complete(run, verdicts)
    with pytest.raises(LookupError, match="--stage l2cache"):
        verify_run(cfg, run, scan, "l2cache")


def test_run_verdict_sums_what_the_layers_recorded():
    cfg = _cfg(commands={"meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"]})
    run = _demo_run(cfg, ["ingest", "meshing"])
    for ls in run.layers.values():
        if ls.stage == "ingest":
            ls.progress.chunks_marked = layer_grid(cfg, "ingest", ls.layer).chunks
    run.layers["ingest-L2"].progress.chunks_marked, run.layers["ingest-L3"].done_before = None, True
    run.layers["ingest-L3"].progress.chunks_marked = None
    run.layers["ingest-L4"].progress.chunks_marked = None  # never checked
    verdict = run_verdict(cfg, run)
    expected = sum(layer_grid(cfg, "ingest", ls).chunks for ls in range(2, 6))
    ingest = verdict["ingest"]
    assert ingest["checked"] and ingest["chunks_expected"] == expected
    assert ingest["layers_unchecked"] == [2, 4]
    assert ingest["chunks_marked"] == expected - 512 - 8
    assert verdict["meshing"]["checked"] is False and verdict["meshing"]["chunks_marked"] is None
    assert "writes no done markers" in verdict["meshing"]["why"]


@pytest.mark.parametrize(
    ("marked", "phase", "next_started"), [(24, "succeeded", True), (23, "failed", False)]
)
def test_decide_fails_a_completed_layer_with_chunks_unmarked(marked, phase, next_started):
    from shared.reconcile.decide import decide
    from shared.reconcile.decision import CreateJob, Snapshot
    from tests.builders.decide_runs import job, make_run, name_for, plans

    run = make_run()
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.job.name, l2.job.completions = "running", name_for(l2), 10
    done = job(l2.job.name, condition="Complete", completion_time=NOW, completed_indexes="0-9")
    grid2 = LayerGrid("ingest", 2, (4, 3, 2), 6, 10)
    check = verify_layer(grid2, _ids(grid2, range(marked)))
    seen = Snapshot(run, {l2.job.name: done}, ledger_checks={"ingest-L2": check})
    decision = decide(seen, plans(run), None, NOW)
    after = decision.state.layers["ingest-L2"]
    assert (after.phase, after.progress.chunks_marked) == (phase, marked)
    kinds = [a.kind for a in decision.actions if isinstance(a, Alert)]
    assert ("layer_incomplete" in kinds) is (phase == "failed")
    started = any(isinstance(a, CreateJob) and a.layer == 3 for a in decision.actions)
    assert started is next_started
    # Without a check (a stage that writes no markers) the Job's condition decides.
    decision = decide(Snapshot(run, {l2.job.name: done}), plans(run), None, NOW)
    assert decision.state.layers["ingest-L2"].phase == "succeeded"


def test_run_finished_carries_the_verdict():
    from shared.control.alerts import alert_body

    cfg = _cfg()
    run = _demo_run(cfg, ["ingest"])
    body = alert_body(cfg, run, Alert("run_finished", details={"status": "succeeded"}), NOW)
    assert body["verify"] == run_verdict(cfg, run)
    assert body["verify"]["ingest"]["layers_unchecked"] == [2, 3, 4, 5]


# Tables that kill mutants the mutation runner found alive (docs/testing-mutation.md).
GRID = LayerGrid("ingest", 3, (4, 3, 2), 6, 10)  # 24 chunks
MISSING = verify_layer(GRID, np.array([GRID.chunk_id(p) for p in range(2, 24)], np.uint64))


def test_missing_chunk_and_layer_verdict_json():
    assert MissingChunk(5, (0, 2, 1), 99).to_json() == {
        "position": 5,
        "coord": [0, 2, 1],
        "chunk_id": 99,
    }
    assert MISSING.to_json() == {
        "stage": "ingest",
        "layer": 3,
        "chunks_expected": 24,
        "chunks_marked": 22,
        "chunks_missing": 2,
        "missing_positions": "0-1",
        "missing_intervals": 1,
        "missing_examples": [
            {"position": 0, "coord": [0, 0, 0], "chunk_id": GRID.chunk_id(0)},
            {"position": 1, "coord": [0, 0, 1], "chunk_id": GRID.chunk_id(1)},
        ],
        "outside_grid": 0,
    }


@pytest.mark.parametrize(
    ("coverage", "want"),
    [
        (
            Coverage(True, ""),
            {"checked": True, "why": "", "complete": False, "chunks_marked": 22},
        ),
        (
            Coverage(False, "writes no done markers"),
            {"checked": False, "why": "writes no done markers", "complete": None},
        ),
    ],
)
def test_stage_verdict_json(coverage, want):
    verdict = StageVerdict("ingest", coverage, (MISSING,) if coverage.checkable else (), 30)
    doc = verdict.to_json()
    layers = [MISSING.to_json()] if coverage.checkable else []
    assert doc == {"chunks_marked": None, **want, "chunks_expected": 30, "layers": layers}


@pytest.mark.parametrize("readable", [True, False])
def test_verify_stage_counts_every_layer_checked_or_not(readable):
    cfg = load_config(DEMO)
    grids = [layer_grid(cfg, "ingest", layer) for layer in (2, 3)]
    done = np.array([grids[1].chunk_id(0)], np.uint64) if readable else None
    verdict = verify_stage(cfg, "ingest", range(2, 4), done)
    assert verdict.chunks_expected == grids[0].chunks + grids[1].chunks
    assert verdict.coverage.checkable
    if readable:
        assert [v.layer for v in verdict.layers] == [2, 3]
        assert [v.chunks_marked for v in verdict.layers] == [0, 1]
    else:
        assert verdict.layers == ()


def test_incomplete_reason_and_details_name_the_way_out():
    verdict = LayerVerdict("ingest", 3, 24, 22, "0-1", 1)
    reason = (
        "incomplete: the Job completed but 2 of 24 chunks carry no done marker (flat "
        "positions 0-1); list them with `pipeline verify r9 --stage ingest`, then "
        "`pipeline submit r9 ingest 3` (done chunks are skipped)"
    )
    assert incomplete_reason("r9", verdict) == reason
    blank = LayerVerdict("ingest", 3, 24, 24)
    assert "(flat positions -)" in incomplete_reason("r9", blank)
    assert incomplete_details("r9", verdict) == {
        "chunks_expected": 24,
        "chunks_marked": 22,
        "chunks_missing": 2,
        "missing_positions": "0-1",
        "missing_intervals": 1,
        "missing_examples": [],
        "outside_grid": 0,
        "reason": reason,
        "fix": "pipeline verify r9 --stage ingest, then pipeline submit r9 ingest 3",
    }


def test_batch_windows_partition_the_layer():
    cfg = load_config(DEMO)
    for layer in (2, 3, 5):
        grid = layer_grid(cfg, "ingest", layer)
        ls = LayerState(stage="ingest", layer=layer)
        per_pod = plan_batch(cfg, ls)
        pods = -(-grid.chunks // per_pod)
        windows = [window_chunk_ids(cfg, "ingest", layer, i) for i in range(pods)]
        assert all(len(w) == per_pod for w in windows[:-1]) and 0 < len(windows[-1]) <= per_pod
        every = [c for w in windows for c in w]
        assert sorted(every) == sorted(grid.chunk_id(p) for p in range(grid.chunks))
    top = LayerState(stage="ingest", layer=5)
    assert plan_batch(cfg, top) == layer_grid(cfg, "ingest", 5).chunks == 1  # the root chunk
    assert (
        plan_batch(cfg, LayerState(stage="ingest", layer=2)) < layer_grid(cfg, "ingest", 2).chunks
    )


def test_an_id_one_past_the_grid_in_y_is_outside():
    from shared.reconcile.completeness import marked_mask

    stray = np.array([GRID.chunk_id(0) + (3 << 50)], np.uint64)  # y = 3 on a (4, 3, 2) grid
    marked, outside = marked_mask(GRID, stray)
    assert outside == 1 and not marked.any()


def test_verify_run_of_one_stage_reads_every_layer_with_the_config():
    from shared.reconcile.build_plan import new_run
    from shared.reconcile.completeness import verify_run

    cfg = load_config(DEMO)
    run = new_run(cfg, "r1", ["ingest", "l2cache"], "auto", T0)
    seen = []

    def scan(c, stage):
        seen.append((c is cfg, stage))
        return np.array([], np.uint64)

    verdicts = verify_run(cfg, run, scan, "ingest")
    assert list(verdicts) == ["ingest"] and seen == [(True, "ingest")]
    assert [v.layer for v in verdicts["ingest"].layers] == list(
        range(2, run.top_layers["ingest"] + 1)
    )


@pytest.mark.parametrize(
    ("commands", "stage", "why"),
    [
        ({}, "ingest", "its pods run the worker, which marks each chunk done"),
        (
            {"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]},
            "ingest",
            "its image's ingest marks each chunk done in the ledger",
        ),
        (
            {"meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"]},
            "meshing",
            "its pods run the image's own command (python -m pychunkedgraph.pipeline.meshing), "
            "which writes no done markers: only the Job's completed indexes vouch for its chunks",
        ),
    ],
)
def test_marker_coverage_says_why(commands, stage, why):
    from shared.reconcile.completeness import marker_coverage

    cfg = load_config(DEMO).model_copy(update={"commands": commands})
    assert marker_coverage(cfg, stage).why == why


@pytest.mark.parametrize("readable", [True, False])
def test_a_stage_verdict_names_its_stage(readable):
    cfg = load_config(DEMO)
    done = np.array([], np.uint64) if readable else None
    assert verify_stage(cfg, "ingest", range(2, 3), done).stage == "ingest"
