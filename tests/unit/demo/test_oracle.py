"""demo.oracle: direct whole-volume counts, and compare() catching bad builds."""

from dataclasses import dataclass

import numpy as np
import pytest

from demo.oracle import compare, expected_stats, observed_stats
from demo.volume import generate_volume
from shared.model.layers import children, chunk_id, layer_count, layer_shape, segment_bits


def _vol(shape, voxels, label=1):
    vol = np.zeros(shape, dtype=np.uint32)
    for v in voxels:
        vol[v] = label
    return vol


def _u_shape():
    """A U in the z=0 plane of a 4x4x2 volume: its 4 chunks each hold one arm piece."""
    pts = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (2, 3), (3, 3), (3, 2), (3, 1), (3, 0)]
    return _vol((4, 4, 2), [(x, y, 0) for x, y in pts])


def _two_labels():
    vol = np.zeros((4, 2, 2), dtype=np.uint32)
    vol[0:2, 0, 0] = 1
    vol[2:4, 0, 0] = 2
    return vol


def _bar(n):
    return _vol((n, 3, 3), [(x, 0, 0) for x in range(n)])


CASES = {
    # name: (volume, chunk size, nodes per layer, root (label, voxels) multiset)
    "empty": (np.zeros((4, 4, 4), np.uint32), (2, 2, 2), {2: 0, 3: 0}, []),
    "one voxel": (_vol((4, 4, 4), [(0, 0, 0)]), (2, 2, 2), {2: 1, 3: 1}, [(1, 1)]),
    "bar over two chunks": (_bar(4), (2, 2, 2), {2: 2, 3: 1}, [(1, 4)]),
    "bar, uneven grid": (_bar(5), (2, 2, 2), {2: 3, 3: 2, 4: 1}, [(1, 5)]),
    "touching labels stay apart": (_two_labels(), (2, 2, 2), {2: 2, 3: 2}, [(1, 2), (2, 2)]),
    "U joined only at the root": (_u_shape(), (2, 2, 2), {2: 4, 3: 1}, [(1, 10)]),
    "diagonal is not connected": (
        _vol((2, 2, 2), [(0, 0, 0), (1, 1, 0)]),
        (2, 2, 2),
        {2: 2},
        [(1, 1), (1, 1)],
    ),
    "full volume one label": (np.full((4, 4, 4), 3, np.uint32), (2, 2, 2), {2: 8, 3: 1}, [(3, 64)]),
}


@pytest.mark.parametrize("name", CASES)
def test_expected_stats_on_hand_made_volumes(name):
    vol, chunk, per_layer, roots = CASES[name]
    stats = expected_stats(vol, chunk)
    assert stats["nodes_per_layer"] == per_layer
    assert stats["n_layers"] == max(per_layer)
    assert stats["root_components"] == sorted(roots)


@dataclass
class Node:
    node_id: int
    label: int
    voxels: int
    parent: int | None = None


def _good_nodes():
    """The U case as a correct table: 4 layer-2 nodes under one root."""
    root = Node((3 << 56) | 1, 1, 10)
    l2 = [Node((2 << 56) | (i << 20) | 1, 1, v, root.node_id) for i, v in enumerate([2, 3, 3, 2])]
    return [root, *l2]


def test_compare_accepts_a_correct_table():
    result = compare(expected_stats(_u_shape(), (2, 2, 2)), observed_stats(_good_nodes(), 3))
    assert result.ok, result.mismatches
    assert result.mismatches == []
    assert result.expected_nodes == result.observed_nodes == {2: 4, 3: 1}
    assert "OK" in result.summary()


def test_compare_flags_extra_nodes_and_orphans():
    nodes = [*_good_nodes(), Node((2 << 56) | 99, 1, 2)]  # a chunk built twice: orphan node
    result = compare(expected_stats(_u_shape(), (2, 2, 2)), observed_stats(nodes, 3))
    assert not result.ok
    assert any("layer 2: 5 nodes, expected 4 (+1" in m for m in result.mismatches)
    assert any("1 nodes below the root have no parent" in m for m in result.mismatches)
    assert result.parentless == 1


def test_compare_flags_missing_nodes_and_wrong_voxels():
    nodes = _good_nodes()
    nodes[0].voxels = 8  # the root missed a skipped chunk's voxels
    del nodes[1]
    result = compare(expected_stats(_u_shape(), (2, 2, 2)), observed_stats(nodes, 3))
    assert not result.ok
    assert any("layer 2: 3 nodes, expected 4 (-1" in m for m in result.mismatches)
    assert any(
        "missing label 1: 10 voxels" in m and "unexpected label 1: 8" in m
        for m in result.mismatches
    )


def test_compare_flags_dangling_parent_and_missing_layer():
    nodes = _good_nodes()[1:]  # no root layer at all
    result = compare(expected_stats(_u_shape(), (2, 2, 2)), observed_stats(nodes, 3))
    assert not result.ok
    assert any(m.startswith("layer 3: 0 nodes, expected 1") for m in result.mismatches)
    assert any("name a parent that does not exist" in m for m in result.mismatches)


# ----------------------------------------------------------------------------- the ingest
# The demo ingest's pure steps (demo.ingest), run in memory without Bigtable:
# the oracle must agree with a correct build and catch a chunk built twice, a skipped chunk and
# a layer started before the one below finished.


@dataclass
class _Rec:
    node_id: int
    label: int
    voxels: int
    parent: int | None


def _build(vol, chunk, *, twice=None, skip=None, early=None):
    from demo.ingest import chunk_bounds, layer2_nodes, merge_children

    size = vol.shape
    l2 = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
    n_layers = layer_count(l2)
    table, counters = {}, {}

    def store(layer, coord, records):
        cid = chunk_id(layer, coord, n_layers, 10)
        for rec in records:
            counters[cid] = counters.get(cid, 0) + 1
            rec.node_id = cid | counters[cid]
            table[rec.node_id] = rec
            for child in rec.children:
                table[int(child)].parent = rec.node_id

    built = set()

    def build_chunk(layer, coord, again=False):
        if (layer, coord) in built and not again:
            return
        built.add((layer, coord))
        lo, hi = chunk_bounds(layer, coord, chunk, size)
        if layer == 2:
            store(layer, coord, layer2_nodes(vol, lo, hi))
            return
        seg = segment_bits(n_layers, layer - 1, 10)
        kid_chunks = {
            chunk_id(layer - 1, c, n_layers, 10)
            for c in children(coord, layer_shape(l2, layer - 1))
        }
        kids = [r for nid, r in table.items() if (nid >> seg) << seg in kid_chunks]
        store(layer, coord, merge_children(sorted(kids, key=lambda r: r.node_id), lo, hi, size)[0])

    for layer in range(2, n_layers + 1):
        sh = layer_shape(l2, layer)
        coords = [(x, y, z) for x in range(sh[0]) for y in range(sh[1]) for z in range(sh[2])]
        late = []
        for coord in coords:
            if (layer, coord) == skip:
                continue
            if early and (layer, coord) == early[0]:
                late.append(coord)  # built only after the layer above
                continue
            build_chunk(layer, coord)
            if (layer, coord) == twice:
                build_chunk(layer, coord, again=True)
        if late:
            build_chunk(layer + 1, early[1])
            for coord in late:
                build_chunk(layer, coord)
    nodes = [_Rec(n.node_id, n.label, n.voxels, n.parent) for n in table.values()]
    return observed_stats(nodes, n_layers), n_layers


@pytest.fixture(scope="module")
def volume():
    return generate_volume((24, 24, 24), seed=11)


def test_a_correct_in_memory_build_matches_the_oracle(volume):
    observed, n_layers = _build(volume, (6, 6, 6))
    result = compare(expected_stats(volume, (6, 6, 6), n_layers), observed)
    assert result.ok, result.mismatches
    assert n_layers == 4


@pytest.mark.parametrize(
    "fault",
    [
        {"twice": (2, (1, 1, 1))},
        {"skip": (2, (2, 1, 0))},
        {"early": ((2, (1, 1, 1)), (0, 0, 0))},  # L3 chunk (0,0,0) built before child (1,1,1)
    ],
    ids=["chunk built twice", "chunk skipped", "layer started early"],
)
def test_faulty_in_memory_builds_fail_the_oracle(volume, fault):
    observed, n_layers = _build(volume, (6, 6, 6), **fault)
    result = compare(expected_stats(volume, (6, 6, 6), n_layers), observed)
    assert not result.ok
    assert result.mismatches
