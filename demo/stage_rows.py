"""Rows of the demo's l2cache and meshing passes: their tables, columns and records.

Each pass writes into a table of its own next to the graph table (:func:`stage_table_id`):
``<graph_id>-l2cache`` and ``<graph_id>-meshes``. The pass's per-chunk claim and done rows
stay in the graph table, keyed apart from ingest's by the stage (``shared.model.chunk_keys``).

One row per node, key ``serialize_uint64(node_id)`` (20 decimal digits, as in the graph
table). Columns, all in family ``"0"``:

======================  ===============  ================================================
column                  value            meaning
======================  ===============  ================================================
``l2_label``            uint64           label of the L2 node's component
``l2_voxels``           uint64           voxel count
``l2_bbox``             uint64[6]        bounding box ``[x0, y0, z0, x1, y1, z1)`` (voxels)
``l2_centroid``         float64[3]       mean voxel coordinate (x, y, z)
``mesh_faces``          uint64           exposed voxel faces of the node's surface within its
                                         chunk (faces on the chunk boundary count)
``mesh_missing``        uint64           children whose mesh row was missing when stitched
======================  ===============  ================================================

Pure (kvdbclient's column types only); reads and writes live in
``demo.stage_tables``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from kvdbclient import attributes, basetypes, serializers

__all__ = [
    "L2CACHE_COLUMNS",
    "MESH_COLUMNS",
    "STAGE_TABLE_SUFFIX",
    "L2CacheRecord",
    "MeshRecord",
    "decode_l2cache",
    "decode_mesh",
    "encode_l2cache",
    "encode_mesh",
    "stage_table_id",
]

#: The table of a pass: ``<graph_id><suffix>``.
STAGE_TABLE_SUFFIX = {"l2cache": "-l2cache", "meshing": "-meshes"}

_U64 = basetypes.NODE_ID  # little-endian uint64
_F64 = np.dtype("<f8")


def _column(key: bytes, serializer: Any) -> attributes._Attribute:
    return attributes._Attribute(key=key, family_id="0", serializer=serializer)


L2_LABEL = _column(b"l2_label", serializers.NumPyValue(dtype=_U64))
L2_VOXELS = _column(b"l2_voxels", serializers.NumPyValue(dtype=_U64))
L2_BBOX = _column(b"l2_bbox", serializers.NumPyArray(dtype=_U64))
L2_CENTROID = _column(b"l2_centroid", serializers.NumPyArray(dtype=_F64))
MESH_FACES = _column(b"mesh_faces", serializers.NumPyValue(dtype=_U64))
MESH_MISSING = _column(b"mesh_missing", serializers.NumPyValue(dtype=_U64))

L2CACHE_COLUMNS = (L2_LABEL, L2_VOXELS, L2_BBOX, L2_CENTROID)
MESH_COLUMNS = (MESH_FACES, MESH_MISSING)


def stage_table_id(graph_id: str, stage: str) -> str:
    """The Bigtable table of ``stage``'s rows (and claims) for ``graph_id``."""
    try:
        return graph_id + STAGE_TABLE_SUFFIX[stage]
    except KeyError:
        raise ValueError(
            f"stage {stage!r} has no table of its own (only {', '.join(STAGE_TABLE_SUFFIX)})"
        ) from None


@dataclass
class L2CacheRecord:
    """Per-object statistics of one L2 node (coordinates in voxels, x, y, z)."""

    node_id: int
    label: int
    voxels: int
    bbox_lo: tuple[int, int, int]
    bbox_hi: tuple[int, int, int]  # exclusive
    centroid: tuple[float, float, float]


@dataclass
class MeshRecord:
    """The surface of one node: exposed voxel faces; ``missing`` children were absent when
    it was stitched (0 unless the layer below was incomplete)."""

    node_id: int
    faces: int
    missing: int = 0


def encode_l2cache(rec: L2CacheRecord) -> dict[attributes._Attribute, Any]:
    return {
        L2_LABEL: np.uint64(rec.label),
        L2_VOXELS: np.uint64(rec.voxels),
        L2_BBOX: np.array([*rec.bbox_lo, *rec.bbox_hi], dtype=np.uint64),
        L2_CENTROID: np.array(rec.centroid, dtype=_F64),
    }


def encode_mesh(rec: MeshRecord) -> dict[attributes._Attribute, Any]:
    return {MESH_FACES: np.uint64(rec.faces), MESH_MISSING: np.uint64(rec.missing)}


def decode_l2cache(node_id: int, cells: dict[attributes._Attribute, Any]) -> L2CacheRecord:
    """From ``{column: value}`` (newest cell of each column)."""
    bbox = [int(v) for v in np.asarray(cells.get(L2_BBOX, np.zeros(6)), dtype=np.uint64)]
    bbox = (bbox + [0] * 6)[:6]
    centroid = [float(v) for v in np.asarray(cells.get(L2_CENTROID, np.zeros(3)), dtype=_F64)]
    centroid = (centroid + [float("nan")] * 3)[:3]
    return L2CacheRecord(
        node_id=int(node_id),
        label=int(cells.get(L2_LABEL, 0)),
        voxels=int(cells.get(L2_VOXELS, 0)),
        bbox_lo=tuple(bbox[:3]),  # type: ignore[arg-type]
        bbox_hi=tuple(bbox[3:]),  # type: ignore[arg-type]
        centroid=tuple(centroid),  # type: ignore[arg-type]
    )


def decode_mesh(node_id: int, cells: dict[attributes._Attribute, Any]) -> MeshRecord:
    return MeshRecord(
        node_id=int(node_id),
        faces=int(cells.get(MESH_FACES, 0)),
        missing=int(cells.get(MESH_MISSING, 0)),
    )
