"""Rows of the demo's miniature chunked graph: column definitions and row decoding.

One row per node, key ``serialize_uint64(node_id)`` (kvdbclient's 20-digit decimal key, so
keys sort by id and a chunk's nodes form one key range: node ids are ``chunk_id | segment``).
Columns, all in family ``"0"``:

===================  ==============  =====================================================
column               value           meaning
===================  ==============  =====================================================
``demo_label``       uint64          segmentation label of the component
``demo_voxels``      uint64          voxel count of the component
``demo_contact_p``   uint64 array    open contacts: voxel inside the node's chunk (flat
``demo_contact_q``   uint64 array    index into the volume, C order) and its same-label
                                     neighbour across the chunk face, outside the chunk
``children``         uint64 array    child node ids (layers > 2; PyChunkedGraph's column)
``parents``          uint64          parent node id (written by the layer above)
===================  ==============  =====================================================

No I/O here: the reads and writes live in ``demo.graph_table``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kvdbclient import attributes, basetypes, serializers

__all__ = [
    "CHILDREN",
    "CONTACT_P",
    "CONTACT_Q",
    "LABEL",
    "NODE_COLUMNS",
    "PARENT",
    "SUMMARY_COLUMNS",
    "VOXELS",
    "NodeRecord",
    "decode_node",
    "node_layer",
    "node_range",
    "encode_node",
]

_U64 = basetypes.NODE_ID  # little-endian uint64

LABEL = attributes._Attribute(
    key=b"demo_label", family_id="0", serializer=serializers.NumPyValue(dtype=_U64)
)
VOXELS = attributes._Attribute(
    key=b"demo_voxels", family_id="0", serializer=serializers.NumPyValue(dtype=_U64)
)
CONTACT_P = attributes._Attribute(
    key=b"demo_contact_p", family_id="0", serializer=serializers.NumPyArray(dtype=_U64)
)
CONTACT_Q = attributes._Attribute(
    key=b"demo_contact_q", family_id="0", serializer=serializers.NumPyArray(dtype=_U64)
)
CHILDREN = attributes.Hierarchy.Child
PARENT = attributes.Hierarchy.Parent

#: Everything a layer above needs to merge a node.
NODE_COLUMNS = (LABEL, VOXELS, CONTACT_P, CONTACT_Q)
#: What the oracle needs (no contacts: they are the bulk of the data).
SUMMARY_COLUMNS = (LABEL, VOXELS, PARENT)

_EMPTY = np.zeros(0, dtype=np.uint64)


@dataclass
class NodeRecord:
    """One node of the demo graph, decoded."""

    node_id: int
    label: int
    voxels: int
    contacts_p: np.ndarray = field(default_factory=lambda: _EMPTY)
    contacts_q: np.ndarray = field(default_factory=lambda: _EMPTY)
    children: np.ndarray = field(default_factory=lambda: _EMPTY)
    parent: int | None = None

    @property
    def layer(self) -> int:
        return node_layer(self.node_id)


def node_layer(node_id: int) -> int:
    """The layer of a node (the top 8 bits of its id, as of its chunk)."""
    return int(node_id) >> 56


def node_range(chunk_id: int, seg_bits: int) -> tuple[int, int]:
    """``[start, end)`` of the node ids of one chunk: ``chunk_id | segment``."""
    return int(chunk_id), int(chunk_id) + (1 << seg_bits)


def encode_node(record: NodeRecord) -> dict[attributes._Attribute, Any]:
    """The cells of a new node row (without ``parents``, which the layer above writes)."""
    cells: dict[attributes._Attribute, Any] = {
        LABEL: np.uint64(record.label),
        VOXELS: np.uint64(record.voxels),
        CONTACT_P: np.ascontiguousarray(record.contacts_p, dtype=np.uint64),
        CONTACT_Q: np.ascontiguousarray(record.contacts_q, dtype=np.uint64),
    }
    if len(record.children):
        cells[CHILDREN] = np.ascontiguousarray(record.children, dtype=np.uint64)
    return cells


def _latest(cells: dict, column: attributes._Attribute, default: Any) -> Any:
    values = cells.get(column)
    return values[0].value if values else default  # newest first


def decode_node(node_id: int, cells: dict) -> NodeRecord:
    """A :class:`NodeRecord` from kvdbclient's ``{column: [Cell, ...]}`` (newest first)."""
    parent = _latest(cells, PARENT, None)
    return NodeRecord(
        node_id=int(node_id),
        label=int(_latest(cells, LABEL, 0)),
        voxels=int(_latest(cells, VOXELS, 0)),
        contacts_p=np.asarray(_latest(cells, CONTACT_P, _EMPTY), dtype=np.uint64),
        contacts_q=np.asarray(_latest(cells, CONTACT_Q, _EMPTY), dtype=np.uint64),
        children=np.asarray(_latest(cells, CHILDREN, _EMPTY), dtype=np.uint64),
        parent=None if parent is None else int(parent),
    )
