"""`python -m worker` against the Bigtable emulator: pods are subprocesses with the Job's env.

The demo (32^3 volume, 8^3 chunks: a 4x4x4 grid, 4 layers) is built batch by batch, layer by
layer, and checked by the oracle; then the harness's contract: done chunks skipped, exit codes
42/1/143, claims released, waits for a chunk held by another pod, renewals within the lock
expiry given in the env.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from google.cloud.bigtable.data.mutations import DeleteRangeFromColumn

from adapters.bigtable.chunk_ledger import (
    CHUNK_DONE,
    BigtableChunkLedger,
    chunk_row_key,
    random_token,
)
from shared.model.grid import batch_coords, coord_to_batch_index
from shared.model.layers import chunk_id, layer_shape
from shared.ports.chunk_ledger import ClaimResult
from tests.builders.worker_runs import (
    BATCH,
    L2_SHAPE,
    N_LAYERS,
    SEED,
    Demo,
    Run,
    _env,
    _finish,
    _first_chunk,
    _oracle,
    _parse,
    _run,
    _run_layer,
    _start,
    _wait_for,
)


def _build(table_id: str, demo: Demo) -> dict[int, list[Run]]:
    return {layer: _run_layer(table_id, demo, layer) for layer in range(2, N_LAYERS + 1)}


# ------------------------------------------------------------------------------- the demo


def test_demo_build_matches_oracle_rerun_skips_and_a_chunk_built_twice_fails(bigtable_table, demo):
    """One build (pod start-up dominates the test time), three checks in order."""
    client, table_id = bigtable_table
    runs = _build(table_id, demo)
    result = _oracle(client, demo)
    assert result.ok, result.mismatches
    for layer, layer_runs in runs.items():
        summaries = [r.summary() for r in layer_runs]
        assert sum(s["processed"] for s in summaries) == int(np.prod(layer_shape(L2_SHAPE, layer)))
        assert all(s["skipped"] == 0 and s["chunk_compute_s"] > 0 for s in summaries)
        # the first chunk's compute apart (the canary's forecast separates a pod's cold
        # start from its chunks by it): one of the pod's chunks, never more than all of them
        assert all(0 < s["first_chunk_s"] <= s["chunk_compute_s"] for s in summaries)
        # a chunk's whole span (claim to done marker) holds its compute, the first apart too
        assert all(s["chunk_span_s"] > s["chunk_compute_s"] for s in summaries)
        assert all(s["first_chunk_s"] < s["first_span_s"] <= s["chunk_span_s"] for s in summaries)
        first = layer_runs[0].lines[0]
        assert first["message"] == f"layer {layer} batch 0: {first['chunks']} chunks"
        assert {"severity", "run", "stage", "layer", "index"} <= first.keys()

    # Re-running a batch skips its done chunks: nothing is built twice.
    again = _run(_env(table_id, demo, 2, 1))
    assert again.code == 0, again.messages()
    assert again.summary()["processed"] == 0 and again.summary()["skipped"] == BATCH
    assert again.summary()["first_chunk_s"] is None  # no chunk computed: none to report
    assert again.summary()["first_span_s"] is None and again.summary()["chunk_span_s"] == 0
    assert _oracle(client, demo).ok

    # Without its done marker a chunk is built again: orphan nodes, and the oracle fails.
    coord, cid = _first_chunk()
    assert demo.volume[tuple(slice(c * 8, c * 8 + 8) for c in coord)].any()
    client._table.mutate_row(
        chunk_row_key(cid), DeleteRangeFromColumn(CHUNK_DONE.family_id, CHUNK_DONE.key)
    )
    rebuilt = _run(_env(table_id, demo, 2, coord_to_batch_index(coord, L2_SHAPE, SEED, BATCH)))
    assert rebuilt.code == 0 and rebuilt.summary()["processed"] == 1
    result = _oracle(client, demo)
    assert not result.ok
    assert any(m.startswith("layer 2:") and "(+" in m for m in result.mismatches)
    assert result.parentless > 0


# ------------------------------------------------------------------------------- exit 42


@pytest.mark.parametrize(
    "extra, named",
    [
        ({"PCG_WORKLOAD": "tests.no_such_module:process"}, "tests.no_such_module:process"),
        ({"PCG_WORKLOAD": "tests.builders.plugins:no_such_function"}, "no_such_function"),
        ({"PCG_WORKLOAD": None}, "workloads.ingest"),
        ({"PCG_GRID_SHAPE": None}, "PCG_GRID_SHAPE"),
        ({"PCG_LAYER": "two"}, "PCG_LAYER"),
        ({"PCG_GRID_SHAPE": "4,4,5"}, "PCG_GRID_SHAPE"),
        ({"JOB_COMPLETION_INDEX": "4"}, "JOB_COMPLETION_INDEX"),
        ({"PCG_DATASET_JSON": "{not json"}, "PCG_DATASET_JSON"),
    ],
    ids=["module", "function", "no-workload", "missing", "malformed", "grid", "index", "dataset"],
)
def test_bad_config_exits_42_naming_the_variable(bigtable_table, demo, extra, named):
    _, table_id = bigtable_table
    run = _run(_env(table_id, demo, **extra))
    assert run.code == 42, (run.messages(), run.stderr)
    error = run.lines[-1]
    assert error["severity"] == "ERROR" and named in error["message"]
    if "PCG_WORKLOAD" in extra:
        assert "PCG_WORKLOAD" in error["message"]


def test_fatal_chunk_exits_42_with_coordinates_and_traceback(bigtable_table, demo):
    client, table_id = bigtable_table
    run = _run(_env(table_id, demo, PCG_WORKLOAD="tests.builders.plugins:fatal"))
    assert run.code == 42
    coord, cid = _first_chunk()
    fatal = next(x for x in run.lines if x["message"].startswith("fatal chunk"))
    assert fatal["message"].startswith(f"fatal chunk 2_{coord}")
    assert fatal["coord"] == list(coord) and fatal["severity"] == "ERROR"
    assert "FatalChunkError" in fatal["traceback"] and "plugins.py" in fatal["traceback"]
    assert run.summary()["exit_code"] == 42
    ledger = BigtableChunkLedger(client)
    assert not ledger.is_done(cid)
    assert ledger.claim(cid, random_token()) is ClaimResult.ACQUIRED  # released on failure


def test_missing_volume_is_a_fatal_chunk(bigtable_table, demo, tmp_path):
    _, table_id = bigtable_table
    missing = tmp_path / "gone.npy"
    dataset = {
        **demo.dataset,
        "data_source": {**demo.dataset["data_source"], "watershed": str(missing)},
    }
    run = _run(_env(table_id, demo, PCG_DATASET_JSON=json.dumps(dataset)))
    assert run.code == 42
    fatal = next(x for x in run.lines if x["message"].startswith("fatal chunk 2_"))
    assert str(missing) in fatal["message"]


def test_transient_error_exits_1_and_releases_the_claim(bigtable_table, demo):
    client, table_id = bigtable_table
    run = _run(_env(table_id, demo, PCG_WORKLOAD="tests.builders.plugins:boom"))
    assert run.code == 1
    failed = next(x for x in run.lines if x["severity"] == "ERROR")
    assert "transient boom" in failed["message"] and "RuntimeError" in failed["traceback"]
    # The retry (same index) claims the chunk at once: no waiting for a 60 s lock to lapse.
    retry = _run(_env(table_id, demo, PCG_WORKLOAD="tests.builders.plugins:ok"))
    assert retry.code == 0 and retry.summary()["processed"] == BATCH
    assert "held by another worker" not in retry.messages()
    assert BigtableChunkLedger(client).is_done(_first_chunk()[1])


def test_a_refused_done_marker_is_never_a_silent_done(bigtable_table, demo):
    """A chunk whose claim was taken before its done marker: the fenced marker is refused, the
    pod logs `claim_lost` and exits 1 so Kubernetes retries the index; the chunk stays unmarked
    and the rest of the window is still done."""
    client, table_id = bigtable_table
    coord, cid = _first_chunk()
    steal = ",".join(map(str, coord))
    env = _env(table_id, demo, PCG_WORKLOAD="tests.builders.plugins:claim_stolen")
    run = _run({**env, "TEST_STEAL_COORD": steal})
    assert run.code == 1, run.messages()
    lost = [x for x in run.lines if x.get("event") == "claim_lost"]
    assert lost and lost[0]["severity"] == "ERROR" and "not marked done" in lost[0]["message"]
    ledger = BigtableChunkLedger(client)
    assert not ledger.is_done(cid)
    assert run.summary()["processed"] == BATCH - 1 and run.summary()["transient"] == 1


# ------------------------------------------------------------------------------- SIGTERM


def test_sigterm_during_a_slow_chunk_exits_143_and_releases(bigtable_table, demo):
    client, table_id = bigtable_table
    env = _env(table_id, demo, PCG_WORKLOAD="tests.builders.plugins:slow", PCG_TERM_GRACE_S="1")
    # The chunk would run 10 min: a pod that waited for it instead of leaving after the grace
    # period fails the generous timeout below (no wall-clock bound on the exit itself).
    proc = _start({**env, "TEST_PLUGIN_SLEEP_S": "600"})
    head = _wait_for(proc, "slow chunk started")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    run = _finish(proc, t0, timeout=120)
    lines = _parse("".join(head)) + run.lines
    assert run.code == 143
    assert any("did not finish within the grace period" in x["message"] for x in lines)
    summary = next(x for x in lines if x["message"].startswith("batch summary"))
    assert summary["exit_code"] == 143 and summary["processed"] == 0
    assert any("SIGTERM" in x["message"] for x in lines)
    _, cid = _first_chunk()
    ledger = BigtableChunkLedger(client)
    assert not ledger.is_done(cid)
    assert ledger.claim(cid, random_token()) is ClaimResult.ACQUIRED


def test_sigterm_lets_the_current_chunk_finish_then_stops(bigtable_table, demo):
    client, table_id = bigtable_table
    env = _env(table_id, demo, PCG_WORKLOAD="tests.builders.plugins:slow", PCG_TERM_GRACE_S="20")
    proc = _start({**env, "TEST_PLUGIN_SLEEP_S": "1"})
    head = _wait_for(proc, "slow chunk started")
    proc.send_signal(signal.SIGTERM)
    run = _finish(proc, time.monotonic(), timeout=20)
    lines = _parse("".join(head)) + run.lines
    assert run.code == 143
    summary = next(x for x in lines if x["message"].startswith("batch summary"))
    assert summary["processed"] == 1
    ledger = BigtableChunkLedger(client)
    assert ledger.is_done(_first_chunk()[1])
    batch0 = (chunk_id(2, tuple(c), N_LAYERS, 10) for c in batch_coords(0, L2_SHAPE, SEED, BATCH))
    assert len(ledger.done_among(batch0)) == 1


# ------------------------------------------------------------------------------- claims


def test_claims_are_renewed_within_the_env_lock_expiry(bigtable_table, bigtable_client, demo):
    _, table_id = bigtable_table
    env = _env(
        table_id,
        demo,
        PCG_WORKLOAD="tests.builders.plugins:slow",
        PCG_BATCH_SIZE="1",
        PCG_LOCK_EXPIRY_S="2",
    )
    proc = _start({**env, "TEST_PLUGIN_SLEEP_S": "4.5"})
    _wait_for(proc, "slow chunk started")
    # A rival with the same 2 s expiry: without renewals the claim lapses after 2 s.
    rival = BigtableChunkLedger(bigtable_client(table_id, lock_expiry=timedelta(seconds=2)))
    _, cid = _first_chunk(1)
    deadline = time.monotonic() + 3.5
    while time.monotonic() < deadline:
        assert rival.claim(cid, random_token()) is ClaimResult.HELD_BY_OTHER
        time.sleep(0.3)
    run = _finish(proc, time.monotonic())
    assert run.code == 0
    assert rival.is_done(cid)


EXPIRY_S = 8


@pytest.mark.parametrize("holder_renews", [False, True], ids=["lapses", "stays"])
def test_a_chunk_held_by_another_pod_is_waited_for(
    bigtable_table, bigtable_client, demo, holder_renews
):
    _, table_id = bigtable_table
    holder = BigtableChunkLedger(bigtable_client(table_id, lock_expiry=timedelta(seconds=EXPIRY_S)))
    _, cid = _first_chunk(1)
    token = random_token()
    assert holder.claim(cid, token) is ClaimResult.ACQUIRED  # a preempted predecessor's claim
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(0.4):
            holder.renew(cid, token)

    # The holder renews until the worker has seen the chunk held (its start-up may take
    # longer than the expiry on a loaded machine); then, in "lapses", it stops, like a pod
    # that died holding the claim.
    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    started = time.monotonic()
    proc = _start(
        _env(
            table_id,
            demo,
            PCG_WORKLOAD="tests.builders.plugins:ok",
            PCG_BATCH_SIZE="1",
            PCG_LOCK_EXPIRY_S=str(EXPIRY_S),
        )
    )
    try:
        head = _wait_for(proc, "held by another worker")
        if not holder_renews:
            stop.set()
        run = _finish(proc, started)
    finally:
        stop.set()
    run.lines = _parse("".join(head)) + run.lines
    assert "held by another worker" in run.messages()
    if holder_renews:
        assert run.code == 1
        assert "still held by another worker" in run.messages()
        assert not holder.is_done(cid)
    else:
        assert run.code == 0 and run.summary()["processed"] == 1
        assert holder.is_done(cid)


# ------------------------------------------------------------------------------- the window


@pytest.mark.parametrize("transient", [True, False], ids=["fatal+transient", "fatal-only"])
def test_the_window_is_worked_to_its_end(bigtable_table, demo, transient):
    """Like the predecessor: a failed chunk does not stop the window; 1 if any chunk was
    transient, else 42."""
    client, table_id = bigtable_table
    window = [tuple(int(v) for v in c) for c in batch_coords(0, L2_SHAPE, SEED, BATCH)]
    extra = {"TEST_FATAL_COORD": ",".join(map(str, window[0]))}
    if transient:
        extra["TEST_BOOM_COORD"] = ",".join(map(str, window[1]))
    run = _run({**_env(table_id, demo, PCG_WORKLOAD="tests.builders.plugins:mixed"), **extra})
    failed = 2 if transient else 1
    assert run.code == (1 if transient else 42)
    summary = run.summary()
    assert summary["processed"] == BATCH - failed
    assert (summary["fatal"], summary["transient"]) == (1, int(transient))
    ids = [chunk_id(2, c, N_LAYERS, 10) for c in window]
    assert BigtableChunkLedger(client).done_among(ids) == set(ids[failed:])


# ------------------------------------------------------------------------------- claim loss


@pytest.mark.parametrize(
    "plugin, overdue",
    [("stuck_unrenewable", True), ("cooperative_unrenewable", False)],
    ids=["uninterruptible", "cooperative"],
)
def test_a_claim_that_cannot_be_renewed_ends_the_pod_before_it_lapses(
    bigtable_table, demo, plugin, overdue
):
    client, table_id = bigtable_table
    env = _env(
        table_id,
        demo,
        PCG_WORKLOAD=f"tests.builders.plugins:{plugin}",
        PCG_LOCK_EXPIRY_S="4",
    )
    # The chunk would run 10 min: a pod that waited for it past its claim's expiry fails the
    # generous timeout below; the records say it ended at about expiry - margin.
    proc = _start({**env, "TEST_PLUGIN_SLEEP_S": "600"})
    head = _wait_for(proc, "slow chunk started")
    run = _finish(proc, time.monotonic(), timeout=120)
    lines = _parse("".join(head)) + run.lines
    assert run.code == 1, (run.messages(), run.stderr[-2000:])
    lost = [x for x in lines if x.get("event") == "claim_lost"]
    assert lost and all(x["severity"] == "ERROR" for x in lost)
    assert any("still running after its claim was cancelled" in x["message"] for x in lost) is (
        overdue
    )
    summary = next(x for x in lines if x["message"].startswith("batch summary"))
    assert summary["exit_code"] == 1 and summary["processed"] == 0
    assert not BigtableChunkLedger(client).is_done(_first_chunk()[1])
