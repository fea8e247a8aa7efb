"""The demo's l2cache and meshing passes as worker subprocesses against the Bigtable emulator.

A 32^3 volume in 8^3 chunks (a 4x4x4 grid, 4 layers) is ingested layer by layer, then the
l2cache (layer 2) and meshing (layers 2..4, the root) run as their Jobs would run them
(``python -m worker``, each pass with its own claims and done markers in the graph table);
the oracles agree. Then the oracles are shown able to fail: a corrupted cache row, and a
meshing layer started before the layer below was complete.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from adapters.bigtable.chunk_ledger import (
    BigtableChunkLedger,
    close_bigtable_client,
    open_bigtable_client,
)
from demo.graph_table import read_all_nodes
from demo.oracle import compare, expected_stats, observed_stats
from demo.oracle_stages import check_l2cache, check_meshing
from demo.stage_rows import stage_table_id
from demo.stage_tables import read_l2cache, read_meshes, write_l2cache
from demo.volume import generate_volume, save_volume
from shared.model.grid import layer_batch_size, num_batches
from shared.model.layers import chunk_id, layer_count, layer_shape
from tests.builders.worker_env import REPO, worker_env
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

SIZE, CHUNK, BATCH, SEED = (32, 32, 32), (8, 8, 8), 32, 7
L2_SHAPE = (4, 4, 4)
N_LAYERS = layer_count(L2_SHAPE)


@dataclass
class Graph:
    graph_id: str
    volume: np.ndarray
    dataset: dict[str, Any]
    clients: dict[str, Any]  # table id -> kvdbclient client
    logs: dict[str, list[dict[str, Any]]]  # "<stage>-L<layer>" -> the workers' log lines

    def client(self, table_id: str) -> Any:
        if table_id not in self.clients:
            self.clients[table_id] = _open(table_id)
        return self.clients[table_id]


def _open(table_id: str) -> Any:
    return open_bigtable_client(
        table_id, BIGTABLE_PROJECT, BIGTABLE_INSTANCE, timedelta(seconds=30), create=True
    )


def _env(graph: Graph, table_id: str, stage: str, layer: int, index: int, **extra: str) -> dict:
    return worker_env(
        table_id,
        graph.dataset,
        stage=stage,
        layer=layer,
        index=index,
        batch_size=BATCH,
        seed=SEED,
        l2_shape=L2_SHAPE,
        **extra,
    )


def _start_layer(
    graph: Graph,
    stage: str,
    layer: int,
    indexes: list[int] | None = None,
    table_id: str | None = None,
    **extra: str,
) -> list[subprocess.Popen[str]]:
    """Start the batches of a layer at once (all of them, or ``indexes``), like an Indexed
    Job with full parallelism."""
    n = num_batches(layer_shape(L2_SHAPE, layer), layer_batch_size(BATCH, layer))
    return [
        subprocess.Popen(
            [sys.executable, "-m", "worker"],
            cwd=REPO,
            env=_env(graph, table_id or graph.graph_id, stage, layer, i, **extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (range(n) if indexes is None else indexes)
    ]


def _finish(procs: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    """Wait for the workers (each must exit 0); their log lines."""
    lines: list[dict[str, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        parsed = [json.loads(x) for x in out.splitlines() if x.strip()]
        assert proc.returncode == 0, ("\n".join(x["message"] for x in parsed), err[-3000:])
        lines += parsed
    return lines


def _run_layer(
    graph: Graph,
    stage: str,
    layer: int,
    indexes: list[int] | None = None,
    table_id: str | None = None,
    **extra: str,
) -> list[dict[str, Any]]:
    return _finish(_start_layer(graph, stage, layer, indexes, table_id, **extra))


def _summaries(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [x for x in lines if x["message"].startswith("batch summary")]


@pytest.fixture(scope="module")
def graph(emulators: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graph]:
    """The demo graph ingested, then l2cache and meshing run over it (each once)."""
    path = tmp_path_factory.mktemp("stages") / "volume.npy"
    vol = generate_volume(SIZE, seed=3)
    save_volume(path, vol)
    dataset = {
        "data_source": {"size": list(SIZE), "watershed": str(path)},
        "graph_config": {"CHUNK_SIZE": list(CHUNK), "SPATIAL_BITS": 10},
        "mesh_config": {"max_layer": N_LAYERS},
        "l2cache_config": {},
    }
    g = Graph(f"stages-{uuid.uuid4().hex[:8]}", vol, dataset, {}, {})
    for table_id in (g.graph_id, *(stage_table_id(g.graph_id, s) for s in ("l2cache", "meshing"))):
        g.client(table_id)  # the demo's setup step: every table exists before the Jobs run
    try:
        for layer in range(2, N_LAYERS + 1):
            g.logs[f"ingest-L{layer}"] = _run_layer(g, "ingest", layer)
        # The DAG: l2cache and meshing in parallel once ingest is complete.
        l2cache = _start_layer(g, "l2cache", 2)
        g.logs["meshing-L2"] = _finish(_start_layer(g, "meshing", 2))
        g.logs["l2cache-L2"] = _finish(l2cache)
        for layer in range(3, N_LAYERS + 1):
            g.logs[f"meshing-L{layer}"] = _run_layer(g, "meshing", layer)
        yield g
    finally:
        for client in g.clients.values():
            close_bigtable_client(client)


def test_ingest_then_l2cache_then_meshing_agree_with_the_oracles(graph: Graph):
    nodes = read_all_nodes(graph.client(graph.graph_id))
    ingest = compare(expected_stats(graph.volume, CHUNK, N_LAYERS), observed_stats(nodes, N_LAYERS))
    assert ingest.ok, ingest.summary()
    cache = read_l2cache(graph.client(stage_table_id(graph.graph_id, "l2cache")))
    l2 = check_l2cache(graph.volume, CHUNK, nodes, cache, N_LAYERS)
    assert l2.ok, l2.summary()
    assert l2.checked == sum(n.node_id >> 56 == 2 for n in nodes) == len(cache) > 100
    meshes = read_meshes(graph.client(stage_table_id(graph.graph_id, "meshing")))
    mesh = check_meshing(graph.volume, CHUNK, nodes, meshes, N_LAYERS, top_layer=N_LAYERS)
    assert mesh.ok, mesh.summary()
    assert mesh.layers == [2, 3, 4] and mesh.checked == len(meshes) == len(nodes)
    # Every chunk of each pass was processed, not skipped for ingest's done markers.
    for key, chunks in (("l2cache-L2", 64), ("meshing-L2", 64), ("meshing-L3", 8)):
        assert sum(s["processed"] for s in _summaries(graph.logs[key])) == chunks, key


def test_each_pass_has_its_own_done_markers_and_a_rerun_skips_every_chunk(graph: Graph):
    cids = [
        chunk_id(2, (x, y, z), N_LAYERS, 10) for x in range(4) for y in range(4) for z in range(4)
    ]
    for stage in ("l2cache", "meshing"):
        ledger = BigtableChunkLedger(graph.client(graph.graph_id), stage)
        assert ledger.done_among(cids) == set(cids), stage
    lines = _run_layer(graph, "l2cache", 2)
    assert [s["skipped"] for s in _summaries(lines)] == [32, 32]
    assert sum(s["processed"] for s in _summaries(lines)) == 0


def test_a_corrupted_cache_row_fails_the_l2cache_oracle(graph: Graph):
    client = graph.client(stage_table_id(graph.graph_id, "l2cache"))
    nodes = read_all_nodes(graph.client(graph.graph_id))
    cache = read_l2cache(client)
    victim = max(cache.values(), key=lambda r: r.voxels)
    other = sorted(cache)[len(cache) // 2]
    bad = [
        dataclasses.replace(victim, voxels=victim.voxels + 1),
        dataclasses.replace(cache[other], centroid=(0.5, 0.5, 0.5)),
    ]
    write_l2cache(client, bad)
    try:
        result = check_l2cache(graph.volume, CHUNK, nodes, read_l2cache(client), N_LAYERS)
        assert not result.ok
        text = "\n".join(result.mismatches)
        assert f"node {victim.node_id}: cached label {victim.label} / {victim.voxels + 1}" in text
        assert f"{victim.voxels + 1} voxels" in text and "stored but not in the volume" in text
        assert f"node {other}" in text and "centroid (0.5000, 0.5000, 0.5000) cached" in text
    finally:
        write_l2cache(client, [victim, cache[other]])  # idempotent overwrite restores it
    assert check_l2cache(graph.volume, CHUNK, nodes, read_l2cache(client), N_LAYERS).ok


def test_meshing_a_layer_before_the_one_below_is_complete_fails_the_meshing_oracle(
    graph: Graph,
):
    table = f"{graph.graph_id}-early-meshes"
    graph.client(table)
    extra = {"PCG_SOURCE_GRAPH_ID": graph.graph_id}  # plain worker: claims + rows in `table`
    _run_layer(graph, "meshing", 2, [0], table, **extra)  # 1 of 2 batches
    early = _run_layer(graph, "meshing", 3, None, table, **extra)
    late = _start_layer(graph, "meshing", 2, [1], table, **extra)  # the rest, late
    _run_layer(graph, "meshing", 4, None, table, **extra)
    _finish(late)
    assert any("is meshing layer 2 complete?" in x["message"] for x in early)
    nodes = read_all_nodes(graph.client(graph.graph_id))
    meshes = read_meshes(graph.client(table))
    assert check_meshing(graph.volume, CHUNK, nodes, meshes, N_LAYERS, N_LAYERS, layers=[2]).ok
    result = check_meshing(graph.volume, CHUNK, nodes, meshes, N_LAYERS, top_layer=N_LAYERS)
    assert not result.ok
    text = "\n".join(result.mismatches)
    assert "meshing layer 3:" in text and "stitched without some children's meshes" in text
    assert "meshing chunk 3_(" in text and "meshing chunk 4_(0, 0, 0)" in text
    assert "in the volume but not stored" in text


def test_the_pass_fails_fast_without_its_table(graph: Graph):
    """A pass whose table was never created: exit 42 naming the table (no silent skip)."""
    env = _env(graph, f"{graph.graph_id}-nope", "l2cache", 2, 0)
    env["PCG_SOURCE_GRAPH_ID"] = graph.graph_id
    # A worker that waited or retried on the missing table would hit the timeout.
    proc = subprocess.run(
        [sys.executable, "-m", "worker"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 42, proc.stdout[-2000:]
    assert f"{graph.graph_id}-nope" in proc.stdout


def test_a_pass_whose_own_table_is_missing_names_that_table(graph: Graph):
    """The graph is there, the pass's table is not (a by-hand build that skipped `pipeline
    setup`): every chunk fails fatally at once, the message naming the pass's table and how
    it is made; none is taken for a transient error and retried."""
    other = dataclasses.replace(graph, graph_id=f"{graph.graph_id}-b", clients={}, logs={})
    other.client(other.graph_id)  # the graph's table, without `<graph>-l2cache`
    try:
        _run_layer(other, "ingest", 2)
        [proc] = _start_layer(other, "l2cache", 2, indexes=[0])
        out, _ = proc.communicate(timeout=120)
    finally:
        for client in other.clients.values():
            close_bigtable_client(client)
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    assert proc.returncode == 42, [x["message"] for x in lines]
    failed = [x for x in lines if x.get("exit_code") is not None and "summary" not in x["message"]]
    assert failed and {x["exit_code"] for x in failed} == {42}, [x["message"] for x in failed]
    message = failed[0]["message"]
    assert f"Bigtable table '{other.graph_id}-l2cache' not found" in message, message
    assert "pipeline setup" in message
