"""The demo's l2cache and meshing computations, pure and in memory (no Bigtable): exposed
faces, node -> component matching, stitching (the stitched surface equals the direct one at
every layer), the stage oracles, and the demo's auto-approver."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from demo.graph_rows import NodeRecord
from demo.ingest import chunk_bounds, layer2_nodes, merge_children
from demo.l2cache import l2cache_records, label_chunk, match_nodes
from demo.meshing import (
    exposed_faces,
    l2_meshes,
    paired_contacts,
    stitch_faces,
)
from demo.oracle_stages import check_l2cache, check_meshing, surface_faces
from demo.stage_rows import MeshRecord
from demo.volume import generate_volume
from shared.model.layers import children, chunk_id, layer_count, layer_shape
from worker.errors import FatalChunkError


def _vol(shape, *voxels, label=1, base=None):
    vol = np.zeros(shape, dtype=np.uint32) if base is None else base.copy()
    for v in voxels:
        vol[v] = label
    return vol


_SHELL = np.ones((3, 3, 3), dtype=np.uint32)
_SHELL[1, 1, 1] = 0

# ----------------------------------------------------------------------------- faces

FACES = [
    ("one voxel", _vol((1, 1, 1), (0, 0, 0)), [6]),
    ("a bar of two", _vol((2, 1, 1), (0, 0, 0), (1, 0, 0)), [10]),
    ("a 2x2x2 cube", np.ones((2, 2, 2), dtype=np.uint32), [24]),
    ("an L of three", _vol((2, 2, 1), (0, 0, 0), (1, 0, 0), (1, 1, 0)), [14]),
    ("two labels touching", np.array([[[1]], [[2]]], dtype=np.uint32), [6, 6]),
    ("diagonal: two components", _vol((2, 2, 1), (0, 0, 0), (1, 1, 0)), [6, 6]),
    ("a hollow shell: inner faces count", _SHELL, [54 + 6]),
    ("background between", _vol((3, 1, 1), (0, 0, 0), (2, 0, 0)), [6, 6]),
]


@pytest.mark.parametrize("vol, want", [c[1:] for c in FACES], ids=[c[0] for c in FACES])
def test_exposed_faces_of_hand_made_volumes(vol, want):
    comp, labels, _ = label_chunk(vol)
    assert exposed_faces(comp, len(labels)).tolist() == want
    # the oracle's direct count (a mask per component) agrees
    assert [surface_faces(comp == i + 1) for i in range(len(labels))] == want


def test_label_chunk_numbers_components_by_label_then_raster_order():
    vol = np.zeros((4, 1, 1), dtype=np.uint32)
    vol[:, 0, 0] = [2, 1, 0, 1]
    comp, labels, voxels = label_chunk(vol)
    assert comp[:, 0, 0].tolist() == [3, 1, 0, 2]
    assert labels.tolist() == [1, 1, 2] and voxels.tolist() == [1, 1, 1]


def test_paired_contacts_counts_directed_contacts_with_their_reverse():
    u = np.array
    assert paired_contacts(u([], dtype=np.uint64), u([], dtype=np.uint64)) == 0
    assert paired_contacts(u([1, 2], dtype=np.uint64), u([2, 1], dtype=np.uint64)) == 2
    assert paired_contacts(u([1, 2, 5], dtype=np.uint64), u([2, 3, 6], dtype=np.uint64)) == 0


# ----------------------------------------------------------------------------- matching


def _l2(vol, lo=(0, 0, 0), hi=None, first_id=1):
    hi = hi or vol.shape
    nodes = layer2_nodes(vol, lo, hi)
    for i, n in enumerate(nodes):
        n.node_id = first_id + i
    return nodes


def test_match_nodes_by_contacts_whatever_the_id_order():
    vol = np.zeros((4, 4, 1), dtype=np.uint32)
    vol[0:3, 0, 0] = 1  # A: 2 voxels in the chunk x 0..1, and a contact across x = 2
    vol[0, 2:4, 0] = 1  # B: the same label and voxel count, no contact
    nodes = _l2(vol, hi=(2, 4, 1))
    assert [len(n.contacts_p) > 0 for n in nodes] == [True, False]
    a, b = nodes
    a.node_id, b.node_id = 9, 3  # ids in the other order: contacts decide for A
    comp, labels, voxels = label_chunk(vol[0:2, 0:4, 0:1])
    got = match_nodes(comp, labels, voxels, [a, b], (0, 0, 0), vol.shape)
    assert got == {9: 0, 3: 1}


def test_contactless_ties_follow_id_order_and_a_duplicate_build_maps_onto_the_same():
    vol = np.zeros((5, 1, 1), dtype=np.uint32)
    vol[[0, 2, 4], 0, 0] = 7  # three contactless one-voxel components of one label
    first, again = _l2(vol, first_id=1), _l2(vol, first_id=10)  # a chunk built twice
    comp, labels, voxels = label_chunk(vol)
    got = match_nodes(comp, labels, voxels, first + again, (0, 0, 0), vol.shape)
    assert got == {1: 0, 2: 1, 3: 2, 10: 0, 11: 1, 12: 2}
    recs = l2cache_records(vol, (0, 0, 0), vol.shape, first)
    assert [r.bbox_lo for r in recs] == [(0, 0, 0), (2, 0, 0), (4, 0, 0)]


@pytest.mark.parametrize(
    "change, text",
    [
        ({"label": 5}, "matches no component"),
        ({"voxels": 99}, "matches no component"),
        ({"contacts_p": np.array([3], dtype=np.uint64)}, "sits in a component of label"),
    ],
)
def test_a_node_that_fits_no_component_is_a_fatal_chunk(change, text):
    vol = np.zeros((4, 1, 1), dtype=np.uint32)
    vol[0:2, 0, 0] = 1
    vol[3, 0, 0] = 2
    node = dataclasses.replace(_l2(vol)[0], **change)
    comp, labels, voxels = label_chunk(vol)
    with pytest.raises(FatalChunkError, match=text):
        match_nodes(comp, labels, voxels, [node], (0, 0, 0), vol.shape, "chunk 2_(0, 0, 0)")


def test_l2cache_record_of_a_known_object():
    vol = np.zeros((6, 6, 6), dtype=np.uint32)
    vol[1:3, 2:5, 4] = 3  # 2 x 3 x 1 voxels
    (rec,) = l2cache_records(vol, (0, 0, 0), (6, 6, 6), _l2(vol, first_id=42))
    assert (rec.node_id, rec.label, rec.voxels) == (42, 3, 6)
    assert (rec.bbox_lo, rec.bbox_hi) == ((1, 2, 4), (3, 5, 5))
    assert rec.centroid == pytest.approx((1.5, 3.0, 4.0))


# ----------------------------------------------------------------------------- stitching


def _build(vol, chunk, drop_meshes=()):
    """Ingest, l2cache and meshing in memory: ``(n_layers, nodes, cache, meshes)``; the L2
    meshes of ``drop_meshes`` node ids are lost before layer 3 is stitched."""
    size = vol.shape
    l2 = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
    n_layers = layer_count(l2)
    by_chunk: dict[tuple, list[NodeRecord]] = {}
    cache, meshes = {}, {}
    for layer in range(2, n_layers + 1):
        sh = layer_shape(l2, layer)
        for coord in [(x, y, z) for x in range(sh[0]) for y in range(sh[1]) for z in range(sh[2])]:
            lo, hi = chunk_bounds(layer, coord, chunk, size)
            if layer == 2:
                nodes = layer2_nodes(vol, lo, hi)
            else:
                kids = [
                    k
                    for c in children(coord, layer_shape(l2, layer - 1))
                    for k in by_chunk[(layer - 1, c)]
                ]
                nodes, unmatched = merge_children(kids, lo, hi, size)
                assert unmatched == 0
            cid = chunk_id(layer, coord, n_layers, 10)
            for i, n in enumerate(nodes):
                n.node_id = cid | (i + 1)
            by_chunk[(layer, coord)] = nodes
            if layer == 2:
                cache.update((r.node_id, r) for r in l2cache_records(vol, lo, hi, nodes))
                meshes.update((r.node_id, r) for r in l2_meshes(vol, lo, hi, nodes))
                continue
            if layer == 3:
                for gone in drop_meshes:
                    meshes.pop(gone, None)
            faces = {i: m.faces for i, m in meshes.items()}
            meshes.update((r.node_id, r) for r in stitch_faces(nodes, kids, faces))
    nodes = [n for ns in by_chunk.values() for n in ns]
    return n_layers, nodes, cache, meshes


def _cube(n, label=1):
    return np.full((n, n, n), label, dtype=np.uint32)


def _u_shape():
    """A U of label 1 whose arms are separate within their chunks and joined only below."""
    vol = np.zeros((4, 4, 2), dtype=np.uint32)
    vol[0, :, :] = 1
    vol[3, :, :] = 1
    vol[:, 0, :] = 1
    vol[1:3, 1:3, :] = 2  # another object in the middle, touching the U
    return vol


STITCH = [
    ("a full cube over 8 chunks", _cube(4), (2, 2, 2), [(1, 64, 96)]),
    (
        "a line across chunks",
        _vol((4, 4, 4), *[(1, y, 1) for y in range(4)]),
        (2, 2, 2),
        [(1, 4, 18)],
    ),
    (
        "two labels touching across a face",
        np.concatenate([_cube(2, 1), _cube(2, 2)]),
        (2, 2, 2),
        [(1, 8, 24), (2, 8, 24)],
    ),
    ("a U joined in another chunk", _u_shape(), (2, 2, 2), None),
    ("a hollow shell", np.pad(_SHELL, 1)[:4, :4, :4].copy(), (2, 2, 2), None),
    ("non-cubic, clipped chunks", generate_volume((10, 7, 5), seed=2), (4, 4, 4), None),
    ("random tubes", generate_volume((12, 12, 12), seed=5), (3, 3, 3), None),
]


@pytest.mark.parametrize("vol, chunk, root", [c[1:] for c in STITCH], ids=[c[0] for c in STITCH])
def test_stitched_surfaces_equal_the_direct_ones_at_every_layer(vol, chunk, root):
    n_layers, nodes, cache, meshes = _build(vol, chunk)
    result = check_meshing(vol, chunk, nodes, meshes, n_layers, top_layer=n_layers)
    assert result.ok, result.mismatches
    assert result.layers == list(range(2, n_layers + 1))
    assert check_l2cache(vol, chunk, nodes, cache, n_layers).ok
    if root is not None:
        tops = [
            (n.label, n.voxels, meshes[n.node_id].faces)
            for n in nodes
            if n.node_id >> 56 == n_layers
        ]
        assert sorted(tops) == root


def test_a_child_mesh_missing_when_stitched_fails_the_meshing_oracle():
    vol = generate_volume((12, 12, 12), seed=5)
    n_layers, nodes, _, meshes = _build(vol, (3, 3, 3))
    victim = max((n for n in nodes if n.node_id >> 56 == 2), key=lambda n: n.voxels).node_id
    n_layers, nodes, _, meshes = _build(vol, (3, 3, 3), drop_meshes=[victim])
    assert check_meshing(vol, (3, 3, 3), nodes, meshes, n_layers, n_layers, layers=[4]).ok is False
    result = check_meshing(vol, (3, 3, 3), nodes, meshes, n_layers, top_layer=n_layers)
    assert not result.ok
    text = "\n".join(result.mismatches)
    assert "meshing layer 2: 1 of" in text and f"node {victim}" in text  # its row is gone
    assert "stitched without some children's meshes" in text and "lacked 1" in text
    assert "meshing chunk 3_(" in text and "in the volume but not stored" in text


# ----------------------------------------------------------------------------- oracles


def test_the_l2cache_oracle_names_the_corrupted_row_and_what_the_volume_says():
    vol = generate_volume((12, 12, 12), seed=5)
    n_layers, nodes, cache, _ = _build(vol, (6, 6, 6))
    assert check_l2cache(vol, (6, 6, 6), nodes, cache, n_layers).ok
    node = sorted(cache)[3]
    bad = dict(cache)
    bad[node] = dataclasses.replace(cache[node], bbox_hi=(99, 99, 99))
    del bad[sorted(cache)[0]]
    bad[12345] = cache[node]
    result = check_l2cache(vol, (6, 6, 6), nodes, bad, n_layers)
    assert not result.ok
    text = "\n".join(result.mismatches)
    assert f"(node {node})" in text and "[99, 99, 99]" in text
    assert "1 of" in text and "have no cache row" in text
    assert "1 cache rows name no L2 node of the graph: 12345" in text
    assert result.to_dict()["ok"] is False and result.summary().startswith("l2cache oracle FAILED")


def test_mesh_rows_without_their_node_and_nodes_without_rows_are_reported():
    vol = _cube(4)
    n_layers, nodes, _, meshes = _build(vol, (2, 2, 2))
    root = next(n.node_id for n in nodes if n.node_id >> 56 == n_layers)
    bad = {k: v for k, v in meshes.items() if k != root}
    result = check_meshing(vol, (2, 2, 2), nodes, bad, n_layers, n_layers, layers=[n_layers])
    assert not result.ok and "1 of 1 nodes have no mesh" in result.mismatches[0]
    bad[root] = MeshRecord(root, 95)
    result = check_meshing(vol, (2, 2, 2), nodes, bad, n_layers, n_layers, layers=[n_layers])
    assert "stored but not in the volume: label 1, 64 voxels, 95 faces" in result.mismatches[0]
    assert "in the volume but not stored: label 1, 64 voxels, 96 faces" in result.mismatches[0]


# ----------------------------------------------------------------------------- approver


class _Store:
    """Just enough of the run store for the approver: update_run applies the mutation."""

    def __init__(self, run):
        self.run, self.updates = run, 0

    def update_run(self, run_id, mutate):
        mutate(self.run)
        self.updates += 1
        return self.run


def test_the_auto_approver_approves_each_layer_after_it_is_eligible():
    from demo.auto_approver import APPROVER, AutoApprover
    from shared.model.state import RunState, build_layers

    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    stages, tops = ["ingest", "l2cache", "meshing"], {"ingest": 3, "l2cache": 2, "meshing": 3}
    run = RunState(
        "r", "g", stages, tops, advance="approve", created_at=t0, layers=build_layers(stages, tops)
    )
    now = [t0]
    kicks: list[tuple] = []
    store = _Store(run)
    approver = AutoApprover(store, lambda *a: kicks.append(a), 2.0, clock=lambda: now[0])

    assert approver.step(run) == pytest.approx(2.0)  # ingest-L2: due 2 s after creation
    now[0] = t0 + timedelta(seconds=2)
    assert approver.step(run) is None and approver.approved == ["ingest-L2"]
    assert kicks == [("r", "approve", APPROVER)]
    ls = run.layers["ingest-L2"]
    assert ls.approval.granted and ls.approval.by == APPROVER and ls.approval.at == now[0]
    ls.phase = "running"
    assert approver.step(run) is None  # ingest-L3 waits for L2 to finish
    ls.phase, ls.timing.finished_at = "succeeded", t0 + timedelta(seconds=10)
    now[0] = t0 + timedelta(seconds=11)
    assert approver.step(run) == pytest.approx(1.0)
    now[0] = t0 + timedelta(seconds=12)
    approver.step(run)
    l3 = run.layers["ingest-L3"]
    assert l3.approval.granted and run.ready_since(l3) == ls.timing.finished_at
    # l2cache and meshing become eligible together when ingest completes: one update, one kick
    l3.phase, l3.timing.finished_at = "succeeded", t0 + timedelta(seconds=20)
    now[0] = t0 + timedelta(seconds=22)
    updates = store.updates
    approver.step(run)
    assert approver.approved[-2:] == ["l2cache-L2", "meshing-L2"]
    assert store.updates == updates + 1 and len(kicks) == 3
    assert not run.layers["meshing-L3"].approval.granted
    run.status = "paused"
    assert approver.step(run) is None
