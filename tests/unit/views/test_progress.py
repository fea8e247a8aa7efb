"""shared.views.progress: chunks from index sets, rates, ETAs, what a layer waits on, and which
rows a fixed-height status keeps (table-driven)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.forecast.forecast import LayerForecast, RunForecast
from shared.model.state import RunState, build_layers
from shared.views.progress import (
    LayerPods,
    LayerProgress,
    LayerSize,
    blocking_waits,
    chunks_done,
    cluster_totals,
    layer_progress,
    run_progress,
    visible_rows,
    waits_on,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "completed, size, expected",
    [
        ("", LayerSize(10, 4), 0),
        ("0", LayerSize(10, 4), 4),
        ("0-1", LayerSize(10, 4), 8),
        ("2", LayerSize(10, 4), 2),  # the last batch is short: 10 = 4 + 4 + 2
        ("0-2", LayerSize(10, 4), 10),
        ("0,2", LayerSize(10, 4), 6),
        ("0-3", LayerSize(16, 4), 16),  # no short batch
        ("0-7", LayerSize(8, 1), 8),
        ("5", LayerSize(512, 32), 32),
    ],
)
def test_chunks_done_counts_chunks_not_batches(completed, size, expected):
    assert chunks_done(completed, size) == expected


def _run(advance: str = "approve", stages: tuple[str, ...] = ("ingest",)) -> RunState:
    tops = {s: (4 if s == "ingest" else 2) for s in stages}
    return RunState(
        "r1", "g", list(stages), tops, advance=advance, created_at=T0,
        layers=build_layers(list(stages), tops),
    )  # fmt: skip


def test_waits_on_names_the_layer_below_the_stage_the_approval_and_a_pause():
    run = _run(stages=("ingest", "l2cache"))
    l2, l3 = run.layers["ingest-L2"], run.layers["ingest-L3"]
    assert waits_on(run, l2) == "approval: pipeline approve r1 ingest 2"
    assert waits_on(run, l3) == "ingest-L2 (waiting)"
    assert waits_on(run, run.layers["l2cache-L2"]) == "stage ingest"
    l2.approval.granted = True
    assert waits_on(run, l2) == "the controller's next reconcile"
    l2.timing.held_by_vcpu_cap = True
    assert waits_on(run, l2) == "room under controller.max_vcpus (running layers hold it)"
    l2.timing.held_by_vcpu_cap = False
    run.status = "paused"
    assert waits_on(run, l2) == "run paused: pipeline resume r1"
    l2.phase = "running"
    assert waits_on(run, l2) == ""


def test_a_running_layer_rate_and_eta():
    run = _run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.timing.submitted_at, ls.progress.completed_indexes = (
        "running",
        T0,
        "0-3",
    )  # 40 chunks
    ls.progress.active, ls.job.parallelism, ls.pods.failed, ls.progress.failed_indexes = (
        4,
        8,
        3,
        "7",
    )
    now = T0 + timedelta(minutes=2)
    lp = layer_progress(
        run, ls, LayerSize(100, 10), now, ramp_target=16, cost_usd=0.5,
        pods=LayerPods(ready=3, oom=1),
    )  # fmt: skip
    assert (lp.chunks_done, lp.chunks_total, lp.percent) == (40, 100, 40.0)
    assert lp.chunks_per_min == pytest.approx(20.0)
    assert lp.eta_s == pytest.approx(180.0)  # 60 chunks at 20/min
    assert (lp.active, lp.ready, lp.retries, lp.failed, lp.oom) == (4, 3, 3, 1, 1)
    assert (lp.parallelism, lp.ramp_target, lp.approval) == (8, 16, "no")


def test_a_waiting_layer_has_no_rate_and_unread_pods_are_none():
    run = _run(advance="auto")
    lp = layer_progress(run, run.layers["ingest-L3"], LayerSize(8, 4), T0)
    assert (lp.chunks_done, lp.chunks_per_min, lp.eta_s, lp.elapsed_s) == (0, None, None, None)
    assert (lp.ready, lp.oom, lp.approval) == (None, None, "auto")


def test_a_succeeded_layer_is_complete_whatever_its_index_string():
    run = _run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.timing.submitted_at, ls.timing.finished_at = (
        "succeeded",
        T0,
        T0 + timedelta(minutes=1),
    )
    lp = layer_progress(run, ls, LayerSize(10, 4), T0 + timedelta(hours=1))
    assert (lp.chunks_done, lp.elapsed_s, lp.chunks_per_min) == (10, 60.0, 10.0)


def test_run_rate_counts_overlapping_spans_once():
    run = _run()
    l2, l3 = run.layers["ingest-L2"], run.layers["ingest-L3"]
    l2.timing.submitted_at, l2.timing.finished_at = T0, T0 + timedelta(minutes=2)
    l3.timing.submitted_at = T0 + timedelta(minutes=1)
    now = T0 + timedelta(minutes=4)
    rows = [
        layer_progress(run, l2, LayerSize(60, 10), now),
        layer_progress(run, l3, LayerSize(40, 10), now),
        layer_progress(run, run.layers["ingest-L4"], LayerSize(100, 10), now),
    ]
    l2.phase = "succeeded"
    rows[0] = layer_progress(run, l2, LayerSize(60, 10), now)
    rp = run_progress(run, rows, now, cost_usd=1.0)
    assert (rp.chunks_done, rp.chunks_total) == (60, 200)
    assert rp.chunks_per_min == pytest.approx(15.0)  # 60 chunks over 4 busy minutes
    assert rp.eta_s == pytest.approx(140 / 15 * 60)


def test_cluster_totals_from_pods():
    pods = [
        LayerPods(nodes=frozenset({"n1", "n2"}), cpu_requested=2, memory_requested_gib=4, pods=4),
        LayerPods(nodes=frozenset({"n2", "n3"}), cpu_requested=1, memory_requested_gib=1, pods=1),
    ]
    t = cluster_totals(pods, spot_nodes={"n1", "n3"})
    assert (t.nodes, t.spot_nodes, t.pods, t.cpu_requested, t.memory_requested_gib) == (
        3, 2, 5, 3, 5,
    )  # fmt: skip


def _rows(phases: str) -> list:
    run = _run(advance="auto")
    ls = run.layers["ingest-L2"]
    out = []
    for i, ch in enumerate(phases):
        phase = {"s": "succeeded", "r": "running", "f": "failed", "w": "waiting"}[ch]
        ls.phase, ls.layer = phase, i + 2
        out.append(layer_progress(run, ls, LayerSize(1, 1), T0))
    return out


@pytest.mark.parametrize(
    "phases, max_rows, kept, hidden",
    [
        ("ssrw", 8, [2, 3, 4, 5], {}),
        ("ssssssrrwwwwww", 5, [6, 7, 8, 9, 10], {"succeeded": 4, "waiting": 5}),
        ("sssssfrw", 3, [6, 7, 8], {"succeeded": 4, "waiting": 1}),
        ("ssssss", 2, [6, 7], {"succeeded": 4}),  # the latest succeeded
    ],
)
def test_visible_rows_keep_a_fixed_height(phases, max_rows, kept, hidden):
    rows, rest = visible_rows(_rows(phases), max_rows)
    assert [r.layer for r in rows] == kept and rest == hidden


def test_blocking_waits_are_the_front_of_the_queue():
    run = _run(stages=("ingest", "l2cache"))
    rows = [layer_progress(run, ls, LayerSize(8, 4), T0) for ls in run.ordered_layers()]
    front, behind = blocking_waits(rows)
    assert [lp.key for lp in front] == ["ingest-L2", "l2cache-L2"] and behind == 2


# A layer's forecast: 300 s to go, done 500 s from now (a wait first), $2 more.
LF = LayerForecast("ingest-L2", 300.0, 500.0, 2.0)


@pytest.mark.parametrize(
    "phase, completed, forecast, cost, eta, projected",
    [
        ("running", "0-3", None, 1.0, 90.0, None),  # no forecast: 48 chunks left at 32 a min
        ("running", "0-3", LF, 1.0, 500.0, 3.0),  # the forecast's, and spent + to come
        ("waiting", "", LF, None, 500.0, 2.0),  # a waiting layer: when it will be done
        ("waiting", "", None, None, None, None),
        ("succeeded", "0-9", LF, 1.5, None, 1.5),  # done: what it cost
    ],
)
def test_a_layer_eta_and_projection_come_from_its_forecast(
    phase, completed, forecast, cost, eta, projected
):
    run = _run(advance="auto")
    ls = run.layers["ingest-L2"]
    ls.phase, ls.timing.submitted_at, ls.progress.completed_indexes = phase, T0, completed
    lp = layer_progress(
        run, ls, LayerSize(80, 8), T0 + timedelta(minutes=1), cost_usd=cost, forecast=forecast
    )
    assert lp.eta_s == (None if eta is None else pytest.approx(eta))
    assert lp.projected_usd == (None if projected is None else pytest.approx(projected))


@pytest.mark.parametrize(
    "status, forecast, eta, basis, projected",
    [
        ("running", None, 6 * 60.0, "average rate", None),  # 60 of 120 chunks in 6 min
        ("running", RunForecast(900.0, 4.0, [LF]), 900.0, "forecast", 5.0),
        ("succeeded", RunForecast(0.0, 0.0, []), 0.0, "forecast", 1.0),
    ],
)
def test_the_run_eta_and_projection_come_from_its_forecast(status, forecast, eta, basis, projected):
    run = _run(advance="auto")
    run.status = status
    l2 = run.layers["ingest-L2"]
    l2.phase, l2.timing.submitted_at = "running", T0
    now = T0 + timedelta(minutes=6)
    rows = [layer_progress(run, l2, LayerSize(120, 10), now)]
    rows[0] = LayerProgress(**{**rows[0].__dict__, "chunks_done": 60})
    rp = run_progress(run, rows, now, cost_usd=1.0, forecast=forecast)
    assert (rp.eta_s, rp.eta_basis) == (pytest.approx(eta), basis)
    assert rp.projected_usd == (None if projected is None else pytest.approx(projected))
