"""Reads and writes of the demo's l2cache and mesh rows (``demo.stage_rows``).

Writes go through kvdbclient (``mutate_row``/``write``); reads use the client's data-API
table (``client._table``) with a column filter, as ``demo.graph_table`` does, so the
pass's ledger rows in the same table are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.cloud.bigtable.data import ReadRowsQuery, RowRange
from google.cloud.bigtable.data.row_filters import (
    CellsColumnLimitFilter,
    ColumnRangeFilter,
    RowFilterChain,
    RowFilterUnion,
)
from kvdbclient import BigTableClient
from kvdbclient.serializers import serialize_uint64

from demo.graph_rows import CHILDREN, LABEL, VOXELS, NodeRecord, decode_node, node_range
from demo.stage_rows import (
    L2CACHE_COLUMNS,
    MESH_COLUMNS,
    L2CacheRecord,
    MeshRecord,
    decode_l2cache,
    decode_mesh,
    encode_l2cache,
    encode_mesh,
)

__all__ = ["read_l2cache", "read_meshes", "read_parent_nodes", "write_l2cache", "write_meshes"]

_MAX_ID = (1 << 64) - 1
_MAX_KEYS_PER_READ = 10_000


def _filter(columns: Iterable[Any]) -> RowFilterChain:
    only = RowFilterUnion([ColumnRangeFilter(c.family_id, c.key, c.key) for c in columns])
    return RowFilterChain([only, CellsColumnLimitFilter(1)])


def _read(client: BigTableClient, columns: tuple, node_ids: Iterable[int] | None) -> dict:
    """``{node_id: {column: value}}`` of every node row (or of ``node_ids``) with any of
    ``columns``."""
    by_key = {(c.family_id, c.key): c for c in columns}
    if node_ids is None:
        whole = RowRange(serialize_uint64(0), serialize_uint64(_MAX_ID), end_is_inclusive=True)
        queries = [ReadRowsQuery(row_ranges=[whole], row_filter=_filter(columns))]
    else:
        keys = sorted({serialize_uint64(int(n)) for n in node_ids})
        queries = [
            ReadRowsQuery(row_keys=keys[i : i + _MAX_KEYS_PER_READ], row_filter=_filter(columns))
            for i in range(0, len(keys), _MAX_KEYS_PER_READ)
        ]
    out: dict[int, dict] = {}
    for query in queries:
        for row in client._table.read_rows(query):
            cells: dict = {}
            for cell in row.cells:  # newest first within a column
                column = by_key.get((cell.family, cell.qualifier))
                if column is not None and column not in cells:
                    cells[column] = column.deserialize(cell.value)
            if cells:
                out[int(row.row_key.decode())] = cells
    return out


class _Cell:
    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def read_parent_nodes(client: BigTableClient, chunk_id: int, seg_bits: int) -> list[NodeRecord]:
    """The node rows of one chunk with label, voxel count and ``children`` (which
    ``demo.graph_table``'s chunk reads leave out), in id order; no contacts."""
    start, end = node_range(chunk_id, seg_bits)
    query = ReadRowsQuery(
        row_ranges=[RowRange(serialize_uint64(start), serialize_uint64(min(end, _MAX_ID)))],
        row_filter=_filter((LABEL, VOXELS, CHILDREN)),
    )
    by_key = {(c.family_id, c.key): c for c in (LABEL, VOXELS, CHILDREN)}
    out = []
    for row in client._table.read_rows(query):
        cells: dict = {}
        for cell in row.cells:
            column = by_key.get((cell.family, cell.qualifier))
            if column is not None and column not in cells:
                cells[column] = [_Cell(column.deserialize(cell.value))]
        if cells:
            out.append(decode_node(int(row.row_key.decode()), cells))
    return sorted(out, key=lambda n: n.node_id)


def read_l2cache(
    client: BigTableClient, node_ids: Iterable[int] | None = None
) -> dict[int, L2CacheRecord]:
    """The cache rows (all of them, or those of ``node_ids`` that exist) by node id."""
    return {n: decode_l2cache(n, c) for n, c in _read(client, L2CACHE_COLUMNS, node_ids).items()}


def read_meshes(
    client: BigTableClient, node_ids: Iterable[int] | None = None
) -> dict[int, MeshRecord]:
    """The mesh rows (all of them, or those of ``node_ids`` that exist) by node id."""
    return {n: decode_mesh(n, c) for n, c in _read(client, MESH_COLUMNS, node_ids).items()}


def write_l2cache(client: BigTableClient, records: Iterable[L2CacheRecord]) -> None:
    """Write (overwrite) cache rows: idempotent."""
    rows = [client.mutate_row(serialize_uint64(r.node_id), encode_l2cache(r)) for r in records]
    if rows:
        client.write(rows)


def write_meshes(client: BigTableClient, records: Iterable[MeshRecord]) -> None:
    """Write (overwrite) mesh rows: idempotent."""
    rows = [client.mutate_row(serialize_uint64(r.node_id), encode_mesh(r)) for r in records]
    if rows:
        client.write(rows)
