"""The graph probe (shared/jobs/graph_probe.py) run as an image's setup pod runs it, with the
stand-ins of PyChunkedGraph's ingest setup and `pychunkedgraph.graph`
(tests/builders/pcg_image) on the Bigtable emulator: it runs the setup unchanged, then reports
the grids the image iterates in the line the controller checks; on a volume with a voxel
offset, a size typed as the upper bound is refused naming both grids."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from kvdbclient import BigTableClient, BigTableConfig

from adapters.bigtable.chunk_ledger import ensure_table
from adapters.bigtable.graph_meta_store import write_graph_meta
from shared.jobs.graph_probe import PROBE_FAILED, with_graph_probe
from shared.model.graph_meta import GraphMeta, mismatch, parse_report
from tests.builders.pcg_image_env import image_env
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

SETUP = ["python", "-m", "pychunkedgraph.pipeline.ingest.setup"]


def probe(tmp_path: Path, graph: str, setup: list[str]) -> subprocess.CompletedProcess:
    """The setup pod's command (the probe around `setup`), with the image's environment."""
    argv = [sys.executable if a == "python" else a for a in with_graph_probe(setup, graph)]
    return subprocess.run(
        argv, env=image_env(tmp_path), capture_output=True, text=True, timeout=120, cwd=tmp_path
    )


def test_the_probe_runs_the_setup_then_reports_the_grids_the_image_iterates(emulators, tmp_path):
    graph = f"p-{uuid.uuid4().hex[:8]}"
    done = probe(tmp_path, graph, [*SETUP, graph])
    assert done.returncode == 0, done.stderr
    assert '"outcome": "created"' in done.stdout  # the setup ran, unchanged
    meta = parse_report(done.stdout)
    assert meta == GraphMeta((0, 0, 0), (16, 16, 16), (8, 8, 8), 3, ((2, (2, 2, 2)),))
    assert mismatch(meta, (2, 2, 2), 3) == ""


def test_a_voxel_offset_is_read_as_the_image_reads_it_and_a_wrong_size_refused(emulators, tmp_path):
    graph = f"o-{uuid.uuid4().hex[:8]}"
    ensure_table(graph, BIGTABLE_PROJECT, BIGTABLE_INSTANCE)
    client = BigTableClient(
        graph, config=BigTableConfig(PROJECT=BIGTABLE_PROJECT, INSTANCE=BIGTABLE_INSTANCE)
    )
    try:  # a graph set up from a watershed at voxel offset [8, 0, 0], 16^3 voxels
        write_graph_meta(client, GraphMeta((8, 0, 0), (24, 16, 16), (8, 8, 8), 3))
    finally:
        client.close()
    done = probe(tmp_path, graph, [sys.executable, "-c", "pass"])
    assert done.returncode == 0, done.stderr
    meta = parse_report(done.stdout)
    assert meta is not None and meta.bounds_lo == (8, 0, 0) and meta.layer2_shape == (2, 2, 2)
    assert mismatch(meta, (2, 2, 2), 3) == ""
    # data_source.size typed as the upper bound [24, 16, 16]: a 3x2x2 grid planned
    reason = mismatch(meta, (3, 2, 2), 3)
    assert "layer-2 grid [2, 2, 2] (bounds [8, 0, 0]..[24, 16, 16]" in reason
    assert "vs [3, 2, 2] planned by the controller" in reason


def test_a_failed_setup_keeps_its_status_and_an_unreadable_graph_fails_the_probe(
    emulators, tmp_path
):
    failed = probe(tmp_path, "unused", [sys.executable, "-c", "raise SystemExit(2)"])
    assert failed.returncode == 2 and parse_report(failed.stdout) is None
    missing = f"m-{uuid.uuid4().hex[:8]}"  # no table: the setup "succeeded", nothing to read
    unread = probe(tmp_path, missing, [sys.executable, "-c", "pass"])
    assert unread.returncode == PROBE_FAILED and parse_report(unread.stdout) is None
    assert "graph probe: the setup completed but the graph could not be read back" in unread.stdout
