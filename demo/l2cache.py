"""Demo l2cache: per-object statistics of every L2 node, from the volume, into a cache table.

For each layer-2 chunk the L2 nodes are read from the graph table and each is matched to its
connected component in the chunk (re-derived from the volume, :func:`match_nodes`); its voxel
count, bounding box and centroid are written, one row per node id, into the cache table
``<graph_id>-l2cache`` (``demo.stage_rows``). Idempotent: a chunk run twice overwrites
its rows with the same values (every column of a row is written), so an attempt recovering
from a dead one (``ctx.recovering``) needs no note and no cleanup.

Node -> component, robustly: ingest stores no representative voxel, but it stores every
node's *open contacts*, whose ``p`` voxels lie inside the node's own component. A node with
contacts is matched through them (all its ``p`` must fall into one component whose label and
voxel count agree, else the graph and the volume disagree: a fatal chunk). Only components
without a contact-bearing node are left; each contactless node takes the one with its
(label, voxel count), ties broken deterministically: nodes in id order (ingest allocates ids in
component order) against components in their canonical order (label, then raster order of the
first voxel, as ``scipy.ndimage.label`` numbers them). A chunk ingested twice has two node sets;
both map onto the same components.

Tables (see ``demo.stage_rows``): the worker's table is the graph (its claims and
done markers are the l2cache stage's own rows there, see ``shared.model.chunk_keys``); the cache
rows go to ``<graph_id>-l2cache``. With ``PCG_SOURCE_GRAPH_ID`` set, the graph is read from
that table instead and the worker's own table is the output (the tests use this to write a
pass into a scratch table).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from demo.common import Vec, label_chunk, layer2_volume
from demo.graph_rows import NodeRecord
from demo.graph_table import read_chunk_nodes
from demo.stage_rows import L2CacheRecord, stage_table_id
from demo.stage_tables import write_l2cache
from shared.model.layers import segment_bits
from worker.errors import FatalChunkError

__all__ = [
    "component_stats",
    "l2cache_records",
    "label_chunk",
    "layer2_volume",
    "match_nodes",
    "process_chunk",
    "stage_tables",
    "tables",
]


def _disagree(where: str, node: NodeRecord, what: str) -> FatalChunkError:
    return FatalChunkError(
        f"{where}: node {node.node_id} (label {node.label}, {node.voxels} voxels) {what}: the "
        "graph and the volume disagree (was the volume changed after ingest?)"
    )


def match_nodes(
    comp: np.ndarray,
    labels: np.ndarray,
    voxels: np.ndarray,
    nodes: Sequence[NodeRecord],
    lo: Vec,
    size: Vec,
    where: str = "chunk",
) -> dict[int, int]:
    """Node id -> component index (``comp - 1``) for the L2 nodes of the chunk at ``lo``
    (see the module doc); :class:`FatalChunkError` if a node fits no component."""
    mapping: dict[int, int] = {}
    ordered = sorted(nodes, key=lambda n: n.node_id)
    for node in ordered:
        if not len(node.contacts_p):
            continue
        xyz = np.unravel_index(node.contacts_p.astype(np.int64), size)
        local = tuple(np.asarray(x) - a for x, a in zip(xyz, lo, strict=True))
        inside = np.ones(len(node.contacts_p), dtype=bool)
        for d in range(3):
            inside &= (local[d] >= 0) & (local[d] < comp.shape[d])
        if not inside.all():
            raise _disagree(where, node, "has contact voxels outside its chunk")
        owners = np.unique(comp[local])
        if len(owners) != 1 or owners[0] == 0:
            raise _disagree(where, node, f"has contact voxels in {len(owners)} components")
        c = int(owners[0]) - 1
        if labels[c] != node.label or voxels[c] != node.voxels:
            raise _disagree(
                where, node, f"sits in a component of label {labels[c]} with {voxels[c]} voxels"
            )
        mapping[node.node_id] = c
    claimed = set(mapping.values())
    pool: dict[tuple[int, int], list[int]] = defaultdict(list)
    for c in range(len(labels)):
        if c not in claimed:
            pool[(int(labels[c]), int(voxels[c]))].append(c)
    rank: Counter[tuple[int, int]] = Counter()
    for node in ordered:
        if len(node.contacts_p):
            continue
        key = (int(node.label), int(node.voxels))
        candidates = pool.get(key)
        if not candidates:
            raise _disagree(where, node, "matches no component of the chunk")
        mapping[node.node_id] = candidates[rank[key] % len(candidates)]
        rank[key] += 1
    return mapping


def component_stats(comp: np.ndarray, n: int, lo: Vec) -> tuple[np.ndarray, ...]:
    """Per component ``1..n``: bounding box ``lo`` and ``hi`` (exclusive) and centroid, in
    volume coordinates; arrays of shape ``(n, 3)``."""
    from scipy import ndimage

    box_lo = np.zeros((n, 3), dtype=np.int64)
    box_hi = np.zeros((n, 3), dtype=np.int64)
    for i, sl in enumerate(ndimage.find_objects(comp, max_label=n)):
        if sl is not None:
            box_lo[i] = [s.start + a for s, a in zip(sl, lo, strict=True)]
            box_hi[i] = [s.stop + a for s, a in zip(sl, lo, strict=True)]
    flat = comp.ravel()
    counts = np.maximum(np.bincount(flat, minlength=n + 1)[1:], 1)
    centroid = np.zeros((n, 3), dtype=np.float64)
    for d, axis in enumerate(np.indices(comp.shape)):
        sums = np.bincount(flat, weights=(axis + lo[d]).ravel(), minlength=n + 1)[1:]
        centroid[:, d] = sums / counts
    return box_lo, box_hi, centroid


def matched_components(
    vol: np.ndarray, lo: Vec, hi: Vec, nodes: Sequence[NodeRecord], where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, int]]:
    """The chunk ``[lo, hi)``'s components (``label_chunk``: numbering, labels, voxel counts)
    and each L2 node's component."""
    box = tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
    comp, labels, voxels = label_chunk(np.asarray(vol[box]))
    return comp, labels, voxels, match_nodes(comp, labels, voxels, nodes, lo, vol.shape, where)


def l2cache_records(
    vol: np.ndarray, lo: Vec, hi: Vec, nodes: Sequence[NodeRecord], where: str = "chunk"
) -> list[L2CacheRecord]:
    """The cache rows of the L2 ``nodes`` of the chunk ``[lo, hi)`` of ``vol``."""
    comp, labels, voxels, mapping = matched_components(vol, lo, hi, nodes, where)
    box_lo, box_hi, centroid = component_stats(comp, len(labels), lo)
    out = []
    for node in sorted(nodes, key=lambda n: n.node_id):
        c = mapping[node.node_id]
        out.append(
            L2CacheRecord(
                node_id=node.node_id,
                label=int(labels[c]),
                voxels=int(voxels[c]),
                bbox_lo=tuple(int(v) for v in box_lo[c]),  # type: ignore[arg-type]
                bbox_hi=tuple(int(v) for v in box_hi[c]),  # type: ignore[arg-type]
                centroid=tuple(float(v) for v in centroid[c]),  # type: ignore[arg-type]
            )
        )
    return out


# ------------------------------------------------------------------------------ tables

_clients: dict[str, Any] = {}


def _open(like: Any, table_id: str) -> Any:
    """A client of ``table_id`` in the worker's Bigtable instance (one per process)."""
    client = _clients.get(table_id)
    if client is None:
        from adapters.bigtable.chunk_ledger import open_bigtable_client

        config = getattr(like, "_config", None)
        project = os.environ.get("BIGTABLE_PROJECT") or config.PROJECT  # type: ignore[union-attr]
        instance = os.environ.get("BIGTABLE_INSTANCE") or config.INSTANCE  # type: ignore[union-attr]
        client = open_bigtable_client(table_id, project, instance, like._lock_expiry)
        _clients[table_id] = client
    return client


def stage_tables(ctx: Any, stage: str) -> tuple[Any, Any]:
    """``(graph client, output client)`` of a pass: the worker's own table is the output
    table when ``PCG_SOURCE_GRAPH_ID`` names the graph, else it is the graph table."""
    source = os.environ.get("PCG_SOURCE_GRAPH_ID", "").strip()
    if source and source != ctx.graph_id:
        return _open(ctx.client, source), ctx.client
    return ctx.client, _open(ctx.client, stage_table_id(ctx.graph_id, stage))


def tables(graph_id: str) -> list[str]:
    """The table this pass writes besides the graph's (`pipeline setup` creates it)."""
    return [stage_table_id(graph_id, "l2cache")]


def process_chunk(ctx: Any) -> None:
    """The per-chunk plugin (``demo.l2cache:process_chunk``)."""
    if ctx.layer != 2:
        raise FatalChunkError(f"l2cache is a layer-2 pass; this Job runs layer {ctx.layer}")
    vol, lo, hi, _size, bits = layer2_volume(ctx.dataset, tuple(ctx.coord))
    graph, cache = stage_tables(ctx, "l2cache")
    nodes = read_chunk_nodes(graph, ctx.chunk_id, segment_bits(ctx.n_layers, 2, bits))
    where = f"chunk 2_{tuple(ctx.coord)}"
    if not nodes and np.any(vol[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))]):
        ctx.logger.warning(f"{where} has voxels but no L2 nodes: is ingest layer 2 complete?")
    records = l2cache_records(vol, lo, hi, nodes, where)
    write_l2cache(cache, records)
    ctx.logger.debug(f"{where}: {len(records)} cache rows written", nodes=len(records))
