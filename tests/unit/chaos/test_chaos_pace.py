"""The chaos session's progress, which paces the faults (scripts.chaos_run.ChaosSession
.observe): the share of the build's chunks begun, read from the workers' attempt records."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters import chaos_mailbox as mb
from scripts.chaos_run import ChaosSession
from shared.config.config_files import load_config
from shared.jobs.layer_spec import layer_spec
from shared.reconcile.build_plan import new_run

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"


def test_progress_is_the_share_of_chunks_begun_each_counted_once(tmp_path):
    cfg = load_config(DEMO)
    run = new_run(cfg, "r", ["ingest"], "auto", datetime.now(UTC))
    root = mb.mailbox(tmp_path)
    session = ChaosSession([], root, cfg=cfg)
    total = sum(layer_spec(cfg, ls.stage, ls.layer).chunks for ls in run.ordered_layers())
    for chunk in (1, 2, 3, 3):  # a retried chunk begins twice: one chunk begun
        mb.audit(root, "pod-a", {"event": "begun", "stage": "ingest", "layer": 2,
                                 "chunk_id": chunk})  # fmt: skip
    mb.audit(root, "pod-a", {"event": "done", "stage": "ingest", "layer": 2, "chunk_id": 4})
    session.observe(run)
    assert session._progress == pytest.approx(3 / total)
    # A finished layer counts whole (its records are not read again).
    run.layers["ingest-L2"].phase = "succeeded"
    session._observed_at = float("-inf")  # the next observe reads again at once
    session.observe(run)
    l2 = layer_spec(cfg, "ingest", 2).chunks
    assert session._progress == pytest.approx(l2 / total)
