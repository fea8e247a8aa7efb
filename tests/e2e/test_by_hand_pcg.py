"""The by-hand flow (docs/cli.md#running-a-build-on-the-local-stack-by-hand: `pipeline setup`,
`pipeline start`, approvals) for a lab's own image, on a fresh graph and again on the existing
one (docs/setup-passes.md). Each command is its own process in one folder, as in a terminal.

The image is two stand-ins that follow the real contracts: the ingest setup is
tests/builders/pcg_image (PyChunkedGraph's `pychunkedgraph.pipeline.ingest.setup`: creates table
and metadata, "already exists" without `--exist-ok`, `--exist-ok` skips creating the graph),
run by the controller's own default command for an image-run ingest; the layer pods run the
predecessor's published harness and lock (tests/builders/pcg_ingest.py in the Python 3.12 venv
of tests/builders/pcg_harness.py), reading their grid from the graph's metadata.

Fresh graph: `pipeline setup` leaves the table to the ingest setup, which creates it (no
`--exist-ok`), and the build makes every chunk. Existing graph: the controller finds the
metadata and passes `--exist-ok` by itself (no re-submit, no manual step), the setup creates
nothing, and every chunk is skipped on its done marker.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from tests.builders.cli_stack import local_stack, pipeline, wait_status
from tests.builders.pcg_harness import PRED_VERSION, HarnessUnavailable, harness_python

pytestmark = pytest.mark.e2e
_ = local_stack  # the fixture

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "tests" / "builders" / "pcg_image"
# 16^3 voxels in 8^3 chunks: layer 2 (2x2x2, one pod of 8 chunks) and layer 3 (the root).
SIZE, CHUNK, CHUNKS = 16, 8, 8 + 1


@pytest.fixture(scope="module")
def pcg_python() -> str:
    try:
        return str(harness_python())
    except HarnessUnavailable as exc:
        pytest.skip(f"predecessor harness cave-pipeline=={PRED_VERSION} unavailable: {exc}")


def as_a_labs_image(cfg_path: Path, pcg_python: str) -> None:
    """The demo config turned into a lab's: ingest runs its image's entry point (so its setup
    is the image's own ingest setup), and the dataset names its backend client as
    PyChunkedGraph's setup reads it."""
    raw = yaml.safe_load(cfg_path.read_text())
    raw["commands"] = {"ingest": [pcg_python, "-m", "tests.builders.pcg_ingest"]}
    raw["workloads"] = {k: v for k, v in raw["workloads"].items() if k != "ingest"}
    raw["env"] = {"PYTHONPATH": f"{ROOT}{os.pathsep}{IMAGE}"}
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    ds_path = cfg_path.parent / raw["dataset"]
    ds = yaml.safe_load(ds_path.read_text())
    ds["backend_client"] = {"TYPE": "bigtable", "CONFIG": {"ADMIN": True, "READ_ONLY": False}}
    ds_path.write_text(yaml.safe_dump(ds, sort_keys=False))


def pod_logs(here: Path) -> dict[Path, list[dict]]:
    """Every pod log's JSON lines, by file (the process kubelet's CRI logs)."""
    out = {}
    pods = here / ".local-stack" / "kubernetes" / "kubelet" / "pods"
    for log in sorted(pods.glob("*/container.log")):
        lines = [ln.split(" ", 3)[-1] for ln in log.read_text(errors="replace").splitlines()]
        out[log] = [json.loads(x) for x in lines if x.startswith("{") and x.endswith("}")]
    return out


def build(here: Path, cfg: str, run_id: str, seconds: dict[str, float]) -> dict:
    """`pipeline start --advance approve`, approve once layer 2 waits on it, wait for the end
    (`seconds`: start to layer 2 waiting on its approval, the approval to the run's end)."""
    started = time.monotonic()
    pipeline(here, "start", "-c", cfg, "--run-id", run_id, "--advance", "approve")
    doc = wait_status(
        here,
        run_id,
        lambda d: (
            d["status"] != "running"
            or "setup (failed" in d["layers"][0]["waits_on"]
            or d["layers"][0]["waits_on"].startswith("approval")
        ),
        "waiting on approval",
        timeout=240,
    )
    assert doc["layers"][0]["waits_on"].startswith("approval"), doc  # the setup succeeded
    approved = time.monotonic()
    seconds[f"{run_id} start to setup done"] = round(approved - started, 1)
    assert "approved ingest-L2" in pipeline(here, "approve", run_id, "ingest").stdout
    doc = wait_status(here, run_id, lambda d: d["status"] != "running", "finished", 300)
    seconds[f"{run_id} approval to run end"] = round(time.monotonic() - approved, 1)
    return doc


def test_the_by_hand_flow_with_a_labs_image_on_a_fresh_and_an_existing_graph(
    local_stack: Path, pcg_python: str, capsys: pytest.CaptureFixture[str]
):
    here, seconds = local_stack, {}
    pipeline(here, "demo", "data", "lab", "--size", str(SIZE), "--chunk", str(CHUNK))
    as_a_labs_image(here / "lab" / "pipeline.yml", pcg_python)
    cfg = "lab/pipeline.yml"

    # Fresh graph: the table is the image's to create.
    out = pipeline(here, "setup", "-c", cfg).stdout
    assert "table demo in local-demo/demo does not exist: the ingest setup pass creates it" in out
    doc = build(here, cfg, "r1", seconds)
    assert doc["status"] == "succeeded" and doc["chunks_done"] == doc["chunks_total"] == CHUNKS
    first = pod_logs(here)
    [setup1] = [r["pcg_setup"] for lines in first.values() for r in lines if "pcg_setup" in r]
    assert setup1 == {"argv": ["demo"], "outcome": "created"}
    # The graph probe around it read the grid back with the image's code (docs/setup-passes.md).
    [meta1] = [r["graph_meta"] for lines in first.values() for r in lines if "graph_meta" in r]
    assert meta1["layer_count"] == 3 and meta1["layer_chunk_bounds"] == {"2": [2, 2, 2]}
    chunks1 = [r for lines in first.values() for r in lines if "pcg_chunk" in r]
    assert sorted(r["outcome"] for r in chunks1) == ["ok"] * CHUNKS

    # Existing graph: the same commands again; the controller adds --exist-ok by itself.
    out = pipeline(here, "setup", "-c", cfg).stdout
    assert "holds the graph's metadata: the ingest setup pass runs with --exist-ok" in out
    doc = build(here, cfg, "r2", seconds)
    assert doc["status"] == "succeeded" and doc["chunks_done"] == doc["chunks_total"] == CHUNKS
    second = {k: v for k, v in pod_logs(here).items() if k not in first}
    [setup2] = [r["pcg_setup"] for lines in second.values() for r in lines if "pcg_setup" in r]
    assert setup2 == {"argv": ["demo", "--exist-ok"], "outcome": "exists: skipped"}
    chunks2 = [r for lines in second.values() for r in lines if "pcg_chunk" in r]
    assert sorted(r["outcome"] for r in chunks2) == ["done"] * CHUNKS  # nothing re-done
    with capsys.disabled():
        print("\nby hand with a lab's image:", json.dumps({**seconds, "setups": [setup1, setup2]}))
