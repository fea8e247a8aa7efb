"""The worker contract against the real peer: a demo ingest build whose pods run the
predecessor's published harness (`cave-pipeline[distribution]==0.0.4` in a Python 3.12 venv),
as PyChunkedGraph images do, driven by our controller on the local stack.

The workload (tests/builders/pcg_ingest.py) is written against the harness's API
(`make_processor`, `context_factory`, `bounds_fn`, the predecessor's lock claimed and renewed
as PyChunkedGraph's ingest worker does) and builds the demo's graph, so the demo's oracle
judges the result; every layer's renewal interval, from the Job's PCG_LOCK_EXPIRY_SCALE, must
be at most a third of the claim lifetime. The harness uses `PCG_BATCH_SIZE` as
is and takes the grid from the graph, so this test fails if the controller's Job and the
harness's windows disagree: every index of every layer must get a non-empty window and the
windows of a layer must cover its chunks exactly once.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scripts.demo_run import prepare_config, run_demo
from shared.config.config_files import load_config
from shared.model.grid import layer_batch_size
from shared.model.layers import layer_shape
from tests.builders.pcg_harness import chunk_lines, harness_python_or_skip, harness_windows

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("need_emulators")]

ROOT = Path(__file__).resolve().parents[2]
# 32^3 voxels in 8^3 chunks: layers 2 (4x4x4), 3 (2x2x2) and 4 (the root). Base batch 8:
# 8, 2 and 1 pods. With the base size sent as PCG_BATCH_SIZE, layer 3's index 1 would be empty.
SIZE, CHUNK, BATCH = 32, 8, 8


@pytest.fixture(scope="session")
def pcg_python() -> str:
    """The 3.12 venv's python with the predecessor's harness (built once per machine)."""
    return harness_python_or_skip()


def test_demo_ingest_on_the_predecessors_harness(tmp_path, pcg_python, capsys):
    demo = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
    job = demo.job.model_copy(
        update={"batch_size": BATCH, "ramp": demo.job.ramp.model_copy(update={"max": 8})}
    )
    cfg = demo.model_copy(
        update={
            "job": job,
            # The image's entry point: the harness, not our worker.
            # The setup pass: the demo's own (graph metadata from the volume), which the
            # harness's bounds_fn reads back, as PyChunkedGraph's workers read their graph's.
            "commands": {
                "ingest": [pcg_python, "-m", "tests.builders.pcg_ingest"],
                "ingest_setup": ["python", "-m", "demo.setup"],
            },
            "workloads": {k: v for k, v in demo.workloads.items() if k != "ingest"},
            "env": {"PYTHONPATH": str(ROOT)},
        }
    )
    cfg = prepare_config(cfg, tmp_path, SIZE, CHUNK)
    result = run_demo(cfg, tmp_path, stages=["ingest"], advance="auto", timeout_s=420)

    windows = harness_windows(tmp_path / "stack")
    chunks = chunk_lines(tmp_path / "stack")
    layers = sorted(result.run.layers.values(), key=lambda ls: ls.layer)
    figures = {"layers": [], "oracle_ok": result.oracle["ok"], "status": result.run.status}
    for ls in layers:
        sizes = {i: max(ns) for i, ns in windows[ls.layer].items()}
        figures["layers"].append(
            {
                "layer": ls.layer,
                "pods": ls.job.completions,
                "PCG_BATCH_SIZE": sorted(
                    {c["batch_size"] for c in chunks if c["layer"] == ls.layer}
                ),
                "chunks_per_pod_min": min(sizes.values(), default=0),
                "chunks_per_pod_max": max(sizes.values(), default=0),
                # The image's renewal interval from the Job's PCG_LOCK_EXPIRY_SCALE.
                "renew_s": sorted({c["renew_s"] for c in chunks if c["layer"] == ls.layer}),
            }
        )
    with capsys.disabled():
        print("\npcg harness contract:", json.dumps(figures))

    assert result.ok, (result.run.status, result.oracle.get("mismatches"), figures)
    assert [ls.layer for ls in layers] == [2, 3, 4]
    # The harness's done markers are the predecessor's: the controller checked each layer
    # against them as its Job completed (docs/verify.md).
    assert result.verify["ingest"]["checked_by_controller"] == [2, 3, 4]
    assert result.verify["ingest"]["chunks_marked"] == 64 + 8 + 1
    l2 = (SIZE // CHUNK,) * 3
    for ls in layers:
        n = math.prod(layer_shape(l2, ls.layer))
        assert ls.job.completions == math.ceil(n / layer_batch_size(BATCH, ls.layer))
        assert {c["batch_size"] for c in chunks if c["layer"] == ls.layer} == {
            layer_batch_size(BATCH, ls.layer)
        }
        # The image renews a claim at most every third of its lifetime (3 min: no
        # ROOT_LOCK_EXPIRY in the demo's dataset), at every layer.
        renewals = {c["renew_s"] for c in chunks if c["layer"] == ls.layer}
        assert renewals and max(renewals) <= 60.0 and min(renewals) > 59.9, (ls.layer, renewals)
        # Every pod of the layer ran the harness, and every window was non-empty and stable.
        assert sorted(windows[ls.layer]) == list(range(ls.job.completions)), (ls.layer, figures)
        for index, sizes in windows[ls.layer].items():
            assert len(sizes) == 1 and min(sizes) >= 1, (ls.layer, index, sizes)
        assert sum(max(s) for s in windows[ls.layer].values()) == n
        # Each chunk of the layer built once (done chunks of a retried window are skipped).
        built = [tuple(c["pcg_chunk"]) for c in chunks if c["layer"] == ls.layer]
        built_ok = [
            tuple(c["pcg_chunk"]) for c in chunks if c["layer"] == ls.layer and c["outcome"] == "ok"
        ]
        assert len(set(built)) == n and len(built_ok) == n, ls.layer
