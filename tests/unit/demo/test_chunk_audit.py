"""demo.chunk_audit: the ingest's node rows, chunk by chunk, against the volume (the chaos
verdict's chunks lost and chunks processed twice where unsafe)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from demo.chunk_audit import audit_ingest
from shared.model.layers import chunk_id, layer_count

BITS = 10
CHUNK = (2, 2, 2)


@dataclass
class Node:
    node_id: int
    label: int
    voxels: int
    parent: int | None = None


def _bar_volume():
    """Label 1: a bar across both layer-2 chunks of a 4x2x2 volume; label 2: one voxel in
    the second chunk."""
    vol = np.zeros((4, 2, 2), dtype=np.uint32)
    vol[:, 0, 0] = 1
    vol[3, 1, 1] = 2
    return vol


VOL = _bar_volume()
N_LAYERS = layer_count((2, 1, 1))  # the root is layer 3


def nid(layer, coord, seg):
    return chunk_id(layer, coord, N_LAYERS, BITS) | seg


A, B, C = nid(2, (0, 0, 0), 1), nid(2, (1, 0, 0), 1), nid(2, (1, 0, 0), 2)
R1, R2 = nid(3, (0, 0, 0), 1), nid(3, (0, 0, 0), 2)


def _good():
    return [
        Node(A, 1, 2, R1),
        Node(B, 1, 2, R1),
        Node(C, 2, 1, R2),
        Node(R1, 1, 4),
        Node(R2, 2, 1),
    ]


def _without(*ids):
    return [n for n in _good() if n.node_id not in ids]


def _with(*extra):
    return _good() + list(extra)


def _edit(node_id, **changes):
    return [Node(**{**vars(n), **changes}) if n.node_id == node_id else n for n in _good()]


CASES = {
    # name: (nodes, lost chunks, unsafe chunks)
    "exactly right": (_good(), [], []),
    "a layer-2 chunk never built (the root above is short: inherited)": (
        [Node(A, 1, 2, R1), Node(R1, 1, 2)],
        ["2_(1, 0, 0)"],
        [],
    ),
    "one component of a chunk missing (and so above it)": (
        _without(C, R2),
        ["2_(1, 0, 0)"],
        [],
    ),
    "a dead attempt's duplicate row left with a parent": (
        _with(Node(nid(2, (0, 0, 0), 7), 1, 2, R1)),
        [],
        ["2_(0, 0, 0)"],
    ),
    "a dead attempt's duplicate row left without a parent": (
        _with(Node(nid(2, (0, 0, 0), 7), 1, 2)),
        [],
        ["2_(0, 0, 0)"],
    ),
    "a parentless node": (_edit(B, parent=None), [], ["2_(1, 0, 0)"]),
    "a parent that does not exist": (_edit(B, parent=R1 + 99), [], ["2_(1, 0, 0)"]),
    "a row in no chunk of the grid": (
        _with(Node(nid(2, (3, 0, 0), 1), 1, 2, R1)),
        [],
        ["2_(3, 0, 0)"],
    ),
    "a root built with the wrong size, its children right": (
        _edit(R1, voxels=5),
        [],
        ["3_(0, 0, 0)"],
    ),
    "the root chunk built twice": (
        _with(Node(R1 + 10, 1, 4), Node(R2 + 10, 2, 1)),
        [],
        ["3_(0, 0, 0)"],
    ),
    "a doubled child makes its parent wrong: counted once, below": (
        [Node(**{**vars(n), "voxels": 6}) if n.node_id == R1 else n for n in _good()]
        + [Node(nid(2, (0, 0, 0), 7), 1, 2, R1)],
        [],
        ["2_(0, 0, 0)"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_findings_from_the_rows(name):
    nodes, lost, unsafe = CASES[name]
    findings = audit_ingest(VOL, CHUNK, N_LAYERS, BITS, nodes)
    assert [f.key for f in findings if f.lost] == lost
    assert [f.key for f in findings if f.unsafe] == unsafe
    for f in findings:
        assert f.describe().startswith(f"chunk {f.key}: ")


def test_duplicates_are_named():
    (finding,) = audit_ingest(VOL, CHUNK, N_LAYERS, BITS, _with(Node(A + 5, 1, 2, R1)))
    assert finding.duplicates == ((1, 2),) and finding.extra == 1 and finding.missing == 0
    assert "duplicated: label 1 (2 voxels)" in finding.describe()
