"""Demo ingest: a miniature chunked graph of the demo volume, built layer by layer.

Layer 2, chunk c: every connected component (per label, 6-connectivity) of the chunk's voxels
becomes a node with its label, voxel count and *open contacts* (voxel pairs p inside the chunk,
q just across a face, same label, q inside the volume; flat C-order voxel indices).

Layer L > 2, chunk c: the nodes of the (up to 8) child chunks are united where a contact of
one lands on a voxel of another (q of one is a p of the other); each group becomes one parent
node (label, summed voxels, children, the contacts that still leave the parent chunk) and every
child gets a ``parents`` cell. A node without contacts still gets a parent, so every component
of the volume has one node per layer up to the root.

Node ids come from kvdbclient's id counter, so building a chunk twice leaves extra nodes
(deliberately not idempotent, like PyChunkedGraph). The oracle counts them.

Crash safety: before writing, the chunk saves its allocated id range as its recovery note in
the chunk's ledger row (``ctx.save_note``, fenced). An attempt that finds an unfinished prior
one (``ctx.recovering``) first deletes the node rows of the ranges in that attempt's note,
then allocates and notes its own: a crash at any point leaves either no note (nothing
written yet) or a note covering everything written. The ``parents`` cells a dead attempt
wrote on the children are overwritten by the new attempt (reads take the newest cell), which
gives every child a parent again.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from demo.common import Vec, chunk_bounds, geometry, label_chunk, volume
from demo.graph_rows import NodeRecord
from demo.graph_table import allocate_node_ids, delete_node_ids, read_chunks_nodes, write_nodes
from demo.setup import setup  # noqa: F401 - the stage's setup pass (python -m worker.setup)
from shared.model.layers import children, chunk_id, layer_shape, segment_bits
from worker.errors import FatalChunkError
from worker.fault_points import pause_point

__all__ = [
    "chunk_bounds",
    "decode_note",
    "encode_note",
    "layer2_nodes",
    "merge_children",
    "process_chunk",
]


def layer2_nodes(vol: np.ndarray, lo: Vec, hi: Vec) -> list[NodeRecord]:
    """The components of box ``[lo, hi)`` of ``vol`` with their open contacts (ids unset)."""
    box = tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
    sub = np.asarray(vol[box])
    comp, labels, voxels = label_chunk(sub)
    owners, ps, qs = [], [], []
    for axis in range(3):
        for inner, outer in ((0, lo[axis] - 1), (sub.shape[axis] - 1, hi[axis])):
            if not 0 <= outer < vol.shape[axis]:
                continue  # the volume's own boundary: nothing across
            face = [slice(a, b) for a, b in zip(lo, hi, strict=True)]
            face[axis] = slice(outer, outer + 1)
            outside = np.asarray(vol[tuple(face)]).squeeze(axis)
            c_in = np.take(comp, inner, axis=axis)
            hit = (c_in > 0) & (np.take(sub, inner, axis=axis) == outside)
            idx = list(np.nonzero(hit))
            others = [a for d, a in enumerate(lo) if d != axis]
            gp = [i + a for i, a in zip(idx, others, strict=True)]
            p_xyz = gp[:axis] + [np.full(len(idx[0]), lo[axis] + inner)] + gp[axis:]
            q_xyz = gp[:axis] + [np.full(len(idx[0]), outer)] + gp[axis:]
            owners.append(c_in[hit])
            ps.append(np.ravel_multi_index(p_xyz, vol.shape))
            qs.append(np.ravel_multi_index(q_xyz, vol.shape))
    owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    p = np.concatenate(ps).astype(np.uint64) if ps else np.zeros(0, dtype=np.uint64)
    q = np.concatenate(qs).astype(np.uint64) if qs else np.zeros(0, dtype=np.uint64)
    order = np.argsort(owner, kind="stable")
    owner, p, q = owner[order], p[order], q[order]
    cuts = np.searchsorted(owner, np.arange(1, len(labels) + 2))
    return [
        NodeRecord(0, labels[i], int(voxels[i]), p[cuts[i] : cuts[i + 1]], q[cuts[i] : cuts[i + 1]])
        for i in range(len(labels))
    ]


def _connected_groups(n: int, a: np.ndarray, b: np.ndarray) -> tuple[int, np.ndarray]:
    """Connected components of the graph on ``range(n)`` with edges ``a[i] - b[i]``: the
    group number of every node. Min-label propagation with pointer jumping."""
    lab = np.arange(n)
    while True:
        low = np.minimum(lab[a], lab[b])
        new = lab.copy()
        np.minimum.at(new, a, low)
        np.minimum.at(new, b, low)
        new = new[new]
        if np.array_equal(new, lab):
            break
        lab = new
    roots, group = np.unique(lab, return_inverse=True)
    return len(roots), group


def merge_children(
    kids: list[NodeRecord], lo: Vec, hi: Vec, size: Vec
) -> tuple[list[NodeRecord], int]:
    """Group child nodes connected by contacts inside box ``[lo, hi)``; one parent (id unset,
    ``children`` set) per group. Also returns the number of contacts that point into the box
    but match no child voxel (0 unless a child chunk is missing or incomplete)."""
    n = len(kids)
    if n == 0:
        return [], 0
    lens = [len(k.contacts_p) for k in kids]
    owner = np.repeat(np.arange(n), lens)
    p = np.concatenate([k.contacts_p for k in kids]).astype(np.uint64)
    q = np.concatenate([k.contacts_q for k in kids]).astype(np.uint64)
    q_xyz = np.unravel_index(q.astype(np.int64), size)
    q_in = np.ones(len(q), dtype=bool)
    for d in range(3):
        q_in &= (q_xyz[d] >= lo[d]) & (q_xyz[d] < hi[d])
    order = np.argsort(p, kind="stable")
    sp, so = p[order], owner[order]
    pos = np.minimum(np.searchsorted(sp, q[q_in]), max(len(sp) - 1, 0))
    matched = sp[pos] == q[q_in] if len(sp) else np.zeros(0, dtype=bool)
    a, b = owner[q_in][matched], so[pos[matched]]
    n_groups, group = _connected_groups(n, a, b)
    open_ = np.flatnonzero(~q_in)  # contacts still leaving the parent chunk, by group
    open_ = open_[np.argsort(group[owner[open_]], kind="stable")]
    cuts = np.searchsorted(group[owner[open_]], np.arange(n_groups + 1))
    members_of = np.argsort(group, kind="stable")
    m_cuts = np.searchsorted(group[members_of], np.arange(n_groups + 1))
    out = []
    for g in range(n_groups):
        members = members_of[m_cuts[g] : m_cuts[g + 1]]
        sel = open_[cuts[g] : cuts[g + 1]]
        out.append(
            NodeRecord(
                node_id=0,
                label=kids[members[0]].label,
                voxels=int(sum(kids[m].voxels for m in members)),
                contacts_p=p[sel],
                contacts_q=q[sel],
                children=np.array(sorted(kids[m].node_id for m in members), dtype=np.uint64),
            )
        )
    return out, int(np.count_nonzero(~matched))


def encode_note(ranges: list[tuple[int, int]]) -> bytes:
    """The recovery note of an attempt: the inclusive node id ranges it may write."""
    return json.dumps({"node_ids": [[int(a), int(b)] for a, b in ranges]}).encode()


def decode_note(note: bytes | None) -> list[tuple[int, int]]:
    """The id ranges in a recovery note (none for no note); a note that is not ours is
    fatal, since deleting the wrong rows would be worse than stopping."""
    if not note:
        return []
    try:
        return [(int(a), int(b)) for a, b in json.loads(note)["node_ids"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise FatalChunkError(f"unreadable ingest recovery note {note[:80]!r}: {exc!r}") from exc


def _undo_prior_attempt(ctx: Any) -> None:
    """Delete the node rows of the unfinished earlier attempt(s) whose ranges the note lists."""
    ranges = decode_note(getattr(ctx, "note", None))
    deleted = delete_node_ids(ctx.client, ranges)
    ctx.logger.warning(
        f"chunk {ctx.layer}_{tuple(ctx.coord)}: deleted {deleted} node ids of an unfinished "
        f"earlier attempt (token {getattr(ctx, 'previous_token', None)})",
        deleted_node_ids=deleted,
        ranges=[list(r) for r in ranges],
    )


def process_chunk(ctx: Any) -> None:
    """The per-chunk plugin (``demo.ingest:process_chunk``)."""
    size, chunk_size, bits = geometry(ctx.dataset)
    lo, hi = chunk_bounds(ctx.layer, ctx.coord, chunk_size, size)
    parents: dict[int, int] = {}
    if ctx.layer == 2:
        vol = volume(str(ctx.dataset["data_source"].get("watershed", "")))
        if tuple(vol.shape) != tuple(size):
            raise FatalChunkError(f"volume shape {vol.shape} differs from data_source.size {size}")
        nodes = layer2_nodes(vol, lo, hi)
    else:
        l2_shape = tuple(-(-s // c) for s, c in zip(size, chunk_size, strict=True))
        below = ctx.layer - 1
        seg = segment_bits(ctx.n_layers, below, bits)
        kid_chunks = [
            chunk_id(below, child, ctx.n_layers, bits)
            for child in children(tuple(ctx.coord), layer_shape(l2_shape, below))
        ]
        kids = read_chunks_nodes(ctx.client, kid_chunks, seg)
        nodes, unmatched = merge_children(kids, lo, hi, size)
        if unmatched:
            ctx.logger.warning(
                f"{unmatched} contacts inside chunk {ctx.layer}_{tuple(ctx.coord)} match no "
                "child node: is the layer below complete?"
            )
    if getattr(ctx, "recovering", False):
        _undo_prior_attempt(ctx)
    ids = allocate_node_ids(ctx.client, ctx.chunk_id, len(nodes))
    if len(ids) and hasattr(ctx, "save_note"):
        # Before the first write: a crash from here on leaves a note covering every row.
        ctx.save_note(encode_note([(int(ids[0]), int(ids[-1]))]))
        pause_point("ingest_after_note", ctx.logger)
    for node, nid in zip(nodes, ids, strict=True):
        node.node_id = int(nid)
        parents.update((int(c), node.node_id) for c in node.children)
    # Two writes, the second after a cancellation check: a lost claim stops half-way (and the
    # crash tests can kill a worker with half the rows written).
    half = len(nodes) // 2
    write_nodes(ctx.client, nodes[:half])
    pause_point("ingest_mid_write", ctx.logger)
    if hasattr(ctx, "check_cancelled"):
        ctx.check_cancelled()
    write_nodes(ctx.client, nodes[half:], parents)
