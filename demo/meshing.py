"""Demo meshing: the surface of every node, layer by layer, into a mesh table.

A "mesh" here is the surface statistic a real mesh would give: the number of exposed voxel
faces, i.e. faces between a voxel of the node and a voxel that is not (another label, another
component, background, or outside the node's chunk: faces on the chunk boundary count,
from the node's own side).

Layer 2: each L2 node is matched to its component of the chunk (as the l2cache does,
``demo.l2cache.match_nodes``) and its faces counted (:func:`exposed_faces`).

Layer L > 2 stitches the children (:func:`stitch_faces`): a parent's surface is the sum of its
children's minus 2x the faces two children of the same parent share. Those shared faces are
exactly the children's open contacts ``(p, q)`` whose reverse ``(q, p)`` is an open contact of
a sibling: each directed contact is one side of a shared face, so the parent's faces are the
children's sum minus the number of such directed contacts. At the root this is each
whole-volume component's surface, the volume boundary counting as exposed.

A child without a mesh row (meshing layer L started before layer L - 1 was complete) counts
as 0 faces and is recorded in the parent's ``mesh_missing`` cell with a warning: like the demo
ingest, meshing does not paper over a gating error, so the oracle sees it. Rows live in
``<graph_id>-meshes`` (the pass's claims are its own rows in the graph table, see
``demo_l2cache``); idempotent.

Crash safety: every write sets all of a row's columns, keyed by node id, so an attempt that
recovers from a dead one (``ctx.recovering``) simply overwrites what it wrote: no note, no
cleanup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from demo.common import Vec, chunk_bounds, geometry, layer2_volume
from demo.graph_rows import NodeRecord
from demo.graph_table import read_chunk_nodes, read_chunks_nodes
from demo.l2cache import matched_components, stage_tables
from demo.stage_rows import MeshRecord, stage_table_id
from demo.stage_tables import read_meshes, read_parent_nodes, write_meshes
from shared.model.layers import children, chunk_id, layer_shape, segment_bits

__all__ = [
    "exposed_faces",
    "l2_meshes",
    "paired_contacts",
    "process_chunk",
    "stitch_faces",
    "tables",
]


def exposed_faces(comp: np.ndarray, n: int) -> np.ndarray:
    """Exposed faces of each component ``1..n`` of ``comp`` (0 = background): faces towards
    any other value, the array's boundary included. Shape ``(n,)``."""
    faces = np.zeros(n + 1, dtype=np.int64)
    for axis in range(comp.ndim):
        pad = [(1, 1) if d == axis else (0, 0) for d in range(comp.ndim)]
        padded = np.pad(comp, pad)  # zeros: the boundary is exposed
        a = np.delete(padded, -1, axis=axis)  # each voxel and the next along the axis
        b = np.delete(padded, 0, axis=axis)
        cut = a != b
        faces += np.bincount(a[cut], minlength=n + 1)
        faces += np.bincount(b[cut], minlength=n + 1)
    return faces[1:]


def l2_meshes(
    vol: np.ndarray, lo: Vec, hi: Vec, nodes: Sequence[NodeRecord], where: str = "chunk"
) -> list[MeshRecord]:
    """The mesh rows of the L2 ``nodes`` of the chunk ``[lo, hi)`` of ``vol``."""
    comp, labels, _, mapping = matched_components(vol, lo, hi, nodes, where)
    faces = exposed_faces(comp, len(labels))
    return [
        MeshRecord(node.node_id, int(faces[mapping[node.node_id]]))
        for node in sorted(nodes, key=lambda n: n.node_id)
    ]


def paired_contacts(p: np.ndarray, q: np.ndarray) -> int:
    """How many directed contacts ``(p[i], q[i])`` have their reverse ``(q[i], p[i])`` among
    them: twice the faces shared inside the group."""
    if len(p) == 0:
        return 0
    fwd = np.stack([p, q], axis=1).astype(np.uint64)
    rev = fwd[:, ::-1]
    _, inverse = np.unique(np.concatenate([fwd, rev]), axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    return int(np.count_nonzero(np.isin(inverse[len(p) :], inverse[: len(p)])))


def stitch_faces(
    parents: Sequence[NodeRecord], kids: Sequence[NodeRecord], kid_faces: Mapping[int, int]
) -> list[MeshRecord]:
    """Parents' surfaces from their children's (``kid_faces``: child id -> faces) and the
    children's open contacts (``kids``, the nodes of the child chunks). A child without a
    face count, or without a node row, counts as 0 faces and as ``missing``."""
    by_id = {int(k.node_id): k for k in kids}
    out = []
    for parent in sorted(parents, key=lambda n: n.node_id):
        ids = [int(c) for c in parent.children]
        members = [by_id[c] for c in ids if c in by_id]
        missing = sum(c not in kid_faces or c not in by_id for c in ids)
        total = sum(int(kid_faces.get(c, 0)) for c in ids)
        empty = np.zeros(0, dtype=np.uint64)
        p = np.concatenate([m.contacts_p for m in members] or [empty]).astype(np.uint64)
        q = np.concatenate([m.contacts_q for m in members] or [empty]).astype(np.uint64)
        faces = max(total - paired_contacts(p, q), 0)  # < 0 only with children missing
        out.append(MeshRecord(int(parent.node_id), faces, missing))
    return out


def tables(graph_id: str) -> list[str]:
    """The table this pass writes besides the graph's (`pipeline setup` creates it)."""
    return [stage_table_id(graph_id, "meshing")]


def process_chunk(ctx: Any) -> None:
    """The per-chunk plugin (``demo.meshing:process_chunk``)."""
    where = f"chunk {ctx.layer}_{tuple(ctx.coord)}"
    graph, meshes = stage_tables(ctx, "meshing")
    if ctx.layer == 2:
        vol, lo, hi, _size, bits = layer2_volume(ctx.dataset, tuple(ctx.coord))
        nodes = read_chunk_nodes(graph, ctx.chunk_id, segment_bits(ctx.n_layers, 2, bits))
        records = l2_meshes(vol, lo, hi, nodes, where)
    else:
        size, chunk_size, bits = geometry(ctx.dataset)
        chunk_bounds(ctx.layer, tuple(ctx.coord), chunk_size, size)  # inside the volume?
        l2_shape = tuple(-(-s // c) for s, c in zip(size, chunk_size, strict=True))
        below = ctx.layer - 1
        kid_chunks = [
            chunk_id(below, child, ctx.n_layers, bits)
            for child in children(tuple(ctx.coord), layer_shape(l2_shape, below))  # type: ignore[arg-type]
        ]
        seg = segment_bits(ctx.n_layers, ctx.layer, bits)
        nodes = read_parent_nodes(graph, ctx.chunk_id, seg)  # with their children
        kids = read_chunks_nodes(graph, kid_chunks, segment_bits(ctx.n_layers, below, bits))
        wanted = [int(c) for n in nodes for c in n.children]
        kid_faces = {i: m.faces for i, m in read_meshes(meshes, wanted).items()}
        records = stitch_faces(nodes, kids, kid_faces)
        missing = sum(r.missing for r in records)
        if missing:
            ctx.logger.warning(
                f"{where}: {missing} children have no mesh (counted as 0 faces): is meshing "
                f"layer {below} complete?",
                missing_children=missing,
            )
    write_meshes(meshes, records)
    ctx.logger.debug(f"{where}: {len(records)} mesh rows written", nodes=len(records))
