"""The stand-in of PyChunkedGraph's ingest setup (tests/builders/pcg_image) holds to that
setup's contract on the Bigtable emulator: it creates table and metadata; run again it fails
"already exists"; with --exist-ok it skips creating the graph, so on a table made empty by
something else it leaves the graph without metadata (why the controller refuses that table)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from adapters.bigtable.chunk_ledger import ensure_table
from adapters.bigtable.graph_meta_store import BigtableGraphTables
from shared.ports.graph_table import TableState
from tests.builders.pcg_image_env import image_env
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT


def run_setup(tmp_path: Path, graph: str, *flags: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pychunkedgraph.pipeline.ingest.setup", graph, *flags]
    return subprocess.run(
        argv, env=image_env(tmp_path), capture_output=True, text=True, timeout=120, cwd=tmp_path
    )


def state(graph: str):
    return BigtableGraphTables().read(graph, BIGTABLE_PROJECT, BIGTABLE_INSTANCE)


def test_the_stand_in_follows_the_ingest_setups_contract(emulators, tmp_path):
    graph = f"g-{uuid.uuid4().hex[:8]}"
    first = run_setup(tmp_path, graph)
    assert first.returncode == 0 and '"outcome": "created"' in first.stdout, first.stderr
    table = state(graph)
    assert table.state is TableState.METADATA and table.meta.layer2_shape == (2, 2, 2)
    again = run_setup(tmp_path, graph)
    assert again.returncode != 0 and f"{graph} already exists." in again.stderr
    skipped = run_setup(tmp_path, graph, "--exist-ok")
    assert skipped.returncode == 0 and '"outcome": "exists: skipped"' in skipped.stdout
    assert state(graph) == table

    # A table created empty before it: --exist-ok "succeeds" and the graph has no metadata.
    empty = f"e-{uuid.uuid4().hex[:8]}"
    ensure_table(empty, BIGTABLE_PROJECT, BIGTABLE_INSTANCE)
    assert run_setup(tmp_path, empty, "--exist-ok").returncode == 0
    assert state(empty).state is TableState.NO_METADATA
