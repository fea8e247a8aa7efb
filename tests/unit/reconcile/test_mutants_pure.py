"""Table tests that kill mutants of the newer pure modules the mutation runner found alive
(shared/reconcile/completeness.py, shared/reconcile/hung_pods.py; docs/testing-mutation.md)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from shared.config.config_files import load_config
from shared.model.state import LayerState
from shared.reconcile.completeness import (
    Coverage,
    LayerGrid,
    LayerVerdict,
    MissingChunk,
    StageVerdict,
    incomplete_details,
    incomplete_reason,
    layer_grid,
    verify_layer,
    verify_stage,
)
from shared.reconcile.hung_pods import find_hung, plan_batch, window_chunk_ids
from tests.builders.pod_infos import T0, pod_info
from tests.builders.stored_runs import DEMO

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


def test_find_hung_skips_pods_not_running_or_not_started_and_goes_on():
    at = T0 + timedelta(seconds=100)
    pods = [
        pod_info("pending", phase="Pending"),  # started, but not running
        pod_info("unstarted", started=None),  # running, no start time yet
        pod_info("silent"),  # no signals at all: judged from its start
    ]
    found = find_hung(pods, {}, at, 60)
    assert [(h.name, h.idle_s) for h in found] == [("p-silent", 100.0)]


@pytest.mark.parametrize(
    ("scale", "layers", "lifetime_s", "want"),
    [
        (
            1.0,
            range(2, 6),
            180,
            "env.PCG_LOCK_EXPIRY_SCALE=1 (yours, kept): L3 renews every 120 s, L4 renews every "
            "180 s, L5 renews every 240 s, against a claim lifetime of 180 s (the graph's "
            "ROOT_LOCK_EXPIRY, 3 min by default); the images need a renewal at most every "
            "60 s; at L4, L5 a live claim lapses before it is renewed and a contender can "
            "take a chunk that is still being written. Remove it to get a safe scale per layer",
        ),
        (  # late but renewed in time: no lapse clause; a short lifetime in 3 digits
            0.02,
            range(2, 4),
            3,
            "env.PCG_LOCK_EXPIRY_SCALE=0.02 (yours, kept): L2 renews every 1.2 s, L3 renews "
            "every 2.4 s, against a "
            "claim lifetime of 3 s (the graph's ROOT_LOCK_EXPIRY, 3 min by default); the "
            "images need a renewal at most every 1 s. Remove it to get a safe scale per layer",
        ),
        (  # 10 s and more are printed whole (10.5 s as "10 s")
            0.175,
            range(2, 3),
            30,
            "env.PCG_LOCK_EXPIRY_SCALE=0.175 (yours, kept): L2 renews every 10 s, against "
            "a claim lifetime of 30 s (the graph's ROOT_LOCK_EXPIRY, 3 min by default); the "
            "images need a renewal at most every 10 s. Remove it to get a safe scale per layer",
        ),
    ],
)
def test_override_warning_text(scale, layers, lifetime_s, want):
    from shared.model.lock_renewal import override_warning

    assert override_warning(scale, layers, lifetime_s) == want


def test_claim_lifetime_edges_and_messages():
    from shared.model.lock_renewal import LockRenewalError, claim_lifetime_s, parse_scale

    assert claim_lifetime_s({"graph_config": ["not", "a", "mapping"]}) == 180.0
    assert claim_lifetime_s({"graph_config": {"ROOT_LOCK_EXPIRY": 0.5}}) == 0.5  # under 1 s
    with pytest.raises(LockRenewalError) as bad:
        claim_lifetime_s({"graph_config": {"ROOT_LOCK_EXPIRY": 0}})
    assert str(bad.value) == (
        "graph_config.ROOT_LOCK_EXPIRY: 0 is not a number of seconds > 0; give the claim "
        "lifetime in seconds (e.g. 180) or drop it for the 3-minute default"
    )
    with pytest.raises(LockRenewalError) as bad:
        parse_scale("-1")
    assert str(bad.value) == (
        "env.PCG_LOCK_EXPIRY_SCALE: '-1' is not a number > 0; remove it (the controller sets "
        "a safe value per layer) or give a positive number"
    )


def test_a_renewal_half_a_second_late_is_a_breach():
    from shared.model.lock_renewal import renewal_breaches

    scale = 60.5 * 3 / 180  # L2 renews every 60.5 s against a 60 s bound (180 s lifetime)
    assert [b.layer for b in renewal_breaches(scale, [2], 180.0)] == [2]
    assert renewal_breaches(1.0, [2], 180.0) == []  # exactly at the bound: not a breach


def test_eviction_alert_details_in_full():
    from shared.reconcile.evictions import eviction_alert_details

    ls = LayerState(stage="ingest", layer=2, job_name="j2", memory_request_gib=2.5)
    ls.evictions = "3:4"  # index 3 evicted 4 times (the stored "index:count" form)
    assert eviction_alert_details(ls, 3) == {
        "indexes": [3],
        "evictions": {"3": 4},
        "max_evictions_per_index": 3,
        "job": "j2",
        "memory_request_gib": 2.5,
        "fix": "the kubelet evicts these pods for node memory pressure (they use more than "
        "their request) and the Job retries them without end: raise job.resources.memory for "
        "this layer (`pipeline apply`) or set job.oom_memory_factor, then `pipeline delete` "
        "and `pipeline submit` the layer (done chunks are skipped)",
    }


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


def test_chunk_times_per_pod_and_short_runs():
    from shared.reconcile.hung_pods import note_chunk_times
    from shared.reconcile.pod_accounting import PodRecord

    def rec(uid, seconds, phase="Succeeded"):
        end = T0 + timedelta(seconds=seconds)
        return PodRecord(uid, f"p-{uid}", 0, phase, 1.0, 2.0, T0, T0, end, 0, None, "n")

    ls = LayerState(stage="ingest", layer=2)
    note_chunk_times(ls, [rec("a", 0.5), rec("b", 0.0), rec("c", 9.0, "Failed")], 1)
    assert ls.chunk_s_samples == [0.5]  # one chunk per pod: its whole runtime; 0 s skipped


def test_eviction_counts_text_skips_empty_parts_and_zero_counts():
    from shared.reconcile.evictions import format_counts, parse_counts

    assert parse_counts("1:2,,3:4") == {1: 2, 3: 4}
    assert format_counts({3: 0, 4: 1}) == "4:1"
