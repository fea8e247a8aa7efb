"""Alert bodies: the common fields, a failed batch's chunks from the layer spec, and log
tails added at publish time."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.config.config_files import load_config
from shared.control.alerts import (
    LOG_TAIL_BYTES,
    MAX_BATCHES,
    MAX_BODY_BYTES,
    alert_body,
    body_size,
    bounded,
    tail_requests,
    with_log_tails,
)
from shared.jobs.layer_spec import layer_spec
from shared.model import intervals
from shared.reconcile.build_plan import new_run
from shared.reconcile.decision import Alert
from tests.builders.demo_configs import with_batch

CFG = with_batch(
    load_config(Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml")
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = new_run(CFG, "r1", ["ingest"], "auto", T0)
# A production-sized layer 2 (66,326 batches of 16 chunks) for mass failures.
SCALE = load_config(Path(__file__).resolve().parents[3] / "examples" / "scale" / "pipeline.yml")
SCALE_RUN = new_run(SCALE, "r1", ["ingest"], "auto", T0)


@pytest.mark.parametrize(
    ("alert", "extra"),
    [
        (Alert("approval_needed", "ingest", 3, {"advance": "approve"}), {"advance": "approve"}),
        (Alert("budget_reached", details={"spend_usd": 2.0}), {"spend_usd": 2.0}),
        (Alert("run_finished", details={"status": "succeeded"}), {"status": "succeeded"}),
    ],
)
def test_common_fields(alert, extra):
    body = alert_body(CFG, RUN, alert, T0)
    body.pop("forecast", None)  # approval_needed's projection: its own test below
    body.pop(
        "verify", None
    )  # run_finished's ledger verdict: tests/unit/reconcile/test_completeness.py
    common = {"kind": alert.kind, "run_id": "r1", "graph_id": CFG.graph_id, "at": T0.isoformat()}
    assert body == {**common, "stage": alert.stage, "layer": alert.layer, **extra}
    assert tail_requests(body) == []


def _after_layer_2(pod_seconds: float):
    """The demo run with layer 2 done: 16 pods that took `pod_seconds` each."""
    run = new_run(CFG, "r1", ["ingest"], "approve", T0)
    ls = run.layers["ingest-L2"]
    ls.phase, ls.timing.finished_at = "succeeded", T0
    ls.progress.completed_indexes = f"0-{layer_spec(CFG, 'ingest', 2).completions - 1}"
    ls.pods.succeeded, ls.pods.succeeded_runtime_s = 16, 16 * pod_seconds
    return run


def test_approval_needed_carries_the_layers_projected_duration_and_cost():
    alert = Alert("approval_needed", "ingest", 3, {"advance": "approve"})
    fast = alert_body(CFG, _after_layer_2(10.0), alert, T0)["forecast"]
    slow = alert_body(CFG, _after_layer_2(40.0), alert, T0)["forecast"]
    assert set(fast) == {
        "layer_duration_s",
        "layer_cost_usd",
        "run_remaining_s",
        "run_projected_usd",
    }
    assert 0 < fast["layer_duration_s"] <= fast["run_remaining_s"]
    assert 0 < fast["layer_cost_usd"] <= fast["run_projected_usd"]
    # Slower chunks below: a longer and dearer layer above (the runtimes seen so far count).
    assert slow["layer_duration_s"] > fast["layer_duration_s"]
    assert slow["layer_cost_usd"] > fast["layer_cost_usd"]


@pytest.mark.parametrize("layer", [2, 3])
def test_failed_batches_carry_their_chunks_and_an_empty_tail(layer):
    alert = Alert("failed_indexes", "ingest", layer, {"indexes": [0, 1], "job": "j"})
    body = alert_body(CFG, RUN, alert, T0)
    spec = layer_spec(CFG, "ingest", layer)
    assert body["batches"] == [
        {"index": i, "chunks": [list(c) for c in spec.batch_chunks(i)], "log_tail": ""}
        for i in (0, 1)
    ]
    assert tail_requests(body) == [("j", 0), ("j", 1)]
    filled = with_log_tails(body, {1: "boom"})
    assert [b["log_tail"] for b in filled["batches"]] == ["", "boom"]
    assert [b["log_tail"] for b in body["batches"]] == ["", ""]  # the stored body is untouched


def test_failed_indexes_are_summarised_as_an_interval_string():
    alert = Alert("failed_indexes", "ingest", 2, {"indexes": [5, 0, 1, 2], "job": "j"})
    body = alert_body(CFG, RUN, alert, T0)
    assert (body["indexes"], body["index_count"], body["batches_omitted"]) == ("0-2,5", 4, 0)
    assert body["detail"] == "pipeline inspect r1 ingest 2"


@pytest.mark.parametrize(
    "failed",
    [
        range(0, 4000, 2),  # 2,000 of 5,000 scattered: the longest interval string
        range(1000, 3000),  # 2,000 in one block
        range(5000),  # all of them
    ],
)
def test_a_mass_failure_alert_stays_bounded(failed):
    """A bad image failing thousands of indexes at once: the body keeps every index (as an
    interval string), details MAX_BATCHES batches and stays under 64 KiB with 4 KiB tails."""
    alert = Alert("failed_indexes", "ingest", 2, {"indexes": list(failed), "job": "j"})
    body = alert_body(SCALE, SCALE_RUN, alert, T0)
    assert body_size(body) <= MAX_BODY_BYTES
    assert intervals.parse(body["indexes"]) == list(failed)
    assert len(body["batches"]) + body["batches_omitted"] == len(failed)
    assert len(tail_requests(body)) <= MAX_BATCHES
    tails = {i: "x" * 10 * LOG_TAIL_BYTES for i in failed}
    filled = with_log_tails(body, tails)
    assert body_size(filled) <= MAX_BODY_BYTES
    assert all(len(b["log_tail"]) <= LOG_TAIL_BYTES for b in filled["batches"])
    assert filled["batches"] and filled["batches"][0]["log_tail"]  # tails shared, not dropped


def test_a_log_tail_keeps_its_last_bytes():
    alert = Alert("failed_indexes", "ingest", 2, {"indexes": [0], "job": "j"})
    body = alert_body(CFG, RUN, alert, T0)
    log = "start\n" + "." * LOG_TAIL_BYTES + "Traceback: boom"
    [batch] = with_log_tails(body, {0: log})["batches"]
    assert len(batch["log_tail"]) == LOG_TAIL_BYTES and batch["log_tail"].endswith("boom")


def _small_batch(i: int) -> dict:
    return {"index": i, "chunks": [[i, 0, 0]], "log_tail": "t" * 100}


def _big_batch(i: int) -> dict:
    return {"index": i, "chunks": [[x, x, x] for x in range(2000)], "log_tail": "t" * 4000}


@pytest.mark.parametrize(
    ("body", "check"),
    [
        ({"kind": "k", "reason": "r" * 100_000}, lambda b: len(b["reason"]) <= 4096),
        ({"kind": "k", "error": "é" * 40_000}, lambda b: b["error"].endswith("...")),
        (
            {"kind": "failed_indexes", "batches": [_big_batch(i) for i in range(20)]},
            lambda b: "chunk_count" in b["batches"][-1] and b["batches"][0]["log_tail"],
        ),
        (
            {"kind": "failed_indexes", "batches": [_small_batch(i) for i in range(3000)]},
            lambda b: len(b["batches"]) + b["batches_omitted"] == 3000 and b["batches"],
        ),
        (
            {"kind": "layer_failed", "failed_indexes": ",".join(map(str, range(0, 10**5, 2)))},
            lambda b: b["failed_indexes"].endswith(" ..."),
        ),
        ({"kind": "k", "x": 1}, lambda b: b == {"kind": "k", "x": 1}),
    ],
)
def test_bounded(body, check):
    out = bounded(body)
    assert body_size(out) <= MAX_BODY_BYTES
    assert check(out)
