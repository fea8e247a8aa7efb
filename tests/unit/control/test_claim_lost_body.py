"""The claim_lost alert's pure parts (shared.control.alerts): the records read from a worker's log,
and the body's bounds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from shared.config.config_files import load_config
from shared.control.alerts import MAX_BODY_BYTES, body_size, claim_lost_body, claim_lost_chunks
from shared.reconcile.build_plan import new_run
from tests.builders.stored_runs import DEMO

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("log", "chunks"),
    [
        ("", []),
        (json.dumps({"event": "claim_lost", "chunk_id": 7}), [7]),
        # the keeper's and the harness's lines for one chunk: one id
        ("\n".join(json.dumps({"event": "claim_lost", "chunk_id": 7}) for _ in range(2)), [7]),
        (json.dumps({"event": "claim_lost", "chunk_id": "9"}), [9]),
        # not JSON, no chunk id, another event, a message merely naming it, a JSON list
        ("claim_lost: cut off\n" + json.dumps({"event": "claim_lost"}), []),
        (json.dumps({"event": "chunk_done", "chunk_id": 3, "message": "claim_lost"}), []),
        (json.dumps(["claim_lost"]), []),
    ],
)
def test_claim_lost_chunks_from_a_log(log, chunks):
    assert claim_lost_chunks(log) == chunks


def test_the_body_names_layer_job_and_chunks_and_stays_bounded():
    run = new_run(load_config(DEMO), "r1", ["ingest"], "auto", NOW)
    pods = [(f"pod-{i}", i, list(range(i * 10_000, i * 10_000 + 5_000))) for i in range(50)]
    body = claim_lost_body(run, "ingest", 2, "job-x", pods, NOW)
    assert body["kind"] == "claim_lost" and body["job"] == "job-x" and body["layer"] == 2
    assert body["chunk_count"] == 250_000 and len(body["chunks"]) == 200
    assert len(body["pods"]) == 20 and body["pods_omitted"] == 30
    assert body_size(body) <= MAX_BODY_BYTES
