"""Alert bodies: the common fields, a failed batch's chunks from the layer spec, and log
tails added at publish time."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.alerts import alert_body, tail_requests, with_log_tails
from shared.build_plan import new_run
from shared.config import load_config
from shared.layer_spec import layer_spec
from shared.reconcile import Alert

CFG = load_config(Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = new_run(CFG, "r1", ["ingest"], "auto", T0)


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
    common = {"kind": alert.kind, "run_id": "r1", "graph_id": CFG.graph_id, "at": T0.isoformat()}
    assert body == {**common, "stage": alert.stage, "layer": alert.layer, **extra}
    assert tail_requests(body) == []


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
