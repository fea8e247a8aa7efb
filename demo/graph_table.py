"""Reads and writes of the demo graph's node rows (columns: ``demo.graph_rows``).

Writes and id allocation go through the kvdbclient client (``mutate_row``/``write``,
``create_node_ids``), as PyChunkedGraph does. kvdbclient reads one key range per request, so
the reads of several chunks (a parent's up to 8 children) use the client's data-API table
(``client._table``, as the chunk ledger does) for one request with several ranges: one round
trip instead of eight.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from google.cloud.bigtable.data import ReadRowsQuery, RowRange
from google.cloud.bigtable.data.mutations import DeleteAllFromRow, RowMutationEntry
from google.cloud.bigtable.data.row_filters import (
    CellsColumnLimitFilter,
    ColumnRangeFilter,
    RowFilterChain,
    RowFilterUnion,
)
from kvdbclient import BigTableClient
from kvdbclient.serializers import serialize_uint64

from demo.graph_rows import (
    NODE_COLUMNS,
    PARENT,
    SUMMARY_COLUMNS,
    NodeRecord,
    decode_node,
    encode_node,
    node_range,
)

__all__ = [
    "allocate_node_ids",
    "delete_node_ids",
    "read_all_nodes",
    "read_chunk_nodes",
    "read_chunks_nodes",
    "write_nodes",
]

_MAX_ID = (1 << 64) - 1


def _columns_filter(columns: Iterable) -> RowFilterChain:
    """The newest cell of each of ``columns`` (range filters: the emulator's regex filters
    are slow)."""
    only = RowFilterUnion([ColumnRangeFilter(c.family_id, c.key, c.key) for c in columns])
    return RowFilterChain([only, CellsColumnLimitFilter(1)])


def _decode_rows(rows: Iterable, columns: Iterable) -> list[NodeRecord]:
    by_key = {(c.family_id, c.key): c for c in columns}
    out = []
    for row in rows:
        cells: dict = {}
        for cell in row.cells:  # newest first within a column
            column = by_key.get((cell.family, cell.qualifier))
            if column is not None:
                cells.setdefault(column, []).append(_Cell(column.deserialize(cell.value)))
        if cells:
            out.append(decode_node(int(row.row_key.decode()), cells))
    return sorted(out, key=lambda n: n.node_id)


class _Cell:
    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def read_chunks_nodes(
    client: BigTableClient, chunk_ids: Iterable[int], seg_bits: int
) -> list[NodeRecord]:
    """All node rows of the given chunks of one layer (every id in ``[chunk_id, chunk_id +
    2**seg_bits)``), with their contacts, in id order, in one request."""
    ranges = []
    for cid in sorted({int(c) for c in chunk_ids}):
        start, end = node_range(cid, seg_bits)
        ranges.append(RowRange(serialize_uint64(start), serialize_uint64(min(end, _MAX_ID))))
    if not ranges:
        return []
    # Node rows hold nothing else, so no column filter: just the newest cell of each.
    query = ReadRowsQuery(row_ranges=ranges, row_filter=CellsColumnLimitFilter(1))
    return _decode_rows(client._table.read_rows(query), NODE_COLUMNS)


def read_chunk_nodes(client: BigTableClient, chunk_id: int, seg_bits: int) -> list[NodeRecord]:
    """All node rows of one chunk, with their contacts, in id order."""
    return read_chunks_nodes(client, [chunk_id], seg_bits)


def read_all_nodes(client: BigTableClient) -> list[NodeRecord]:
    """Every node row in the table (orphans included) with label, voxel count and parent;
    contacts are not read. Ledger, counter and meta rows carry none of these columns, so the
    column filter leaves them out."""
    query = ReadRowsQuery(
        row_ranges=[
            RowRange(serialize_uint64(0), serialize_uint64(_MAX_ID), end_is_inclusive=True)
        ],
        row_filter=_columns_filter(SUMMARY_COLUMNS),
    )
    return _decode_rows(client._table.read_rows(query), SUMMARY_COLUMNS)


def allocate_node_ids(client: BigTableClient, chunk_id: int, n: int) -> np.ndarray:
    """``n`` fresh node ids of ``chunk_id`` from kvdbclient's per-chunk counter (never reused:
    not idempotent, like PyChunkedGraph)."""
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    return np.asarray(client.create_node_ids(np.uint64(chunk_id), n), dtype=np.uint64)


def write_nodes(
    client: BigTableClient,
    nodes: Iterable[NodeRecord],
    parents: Mapping[int, int] | None = None,
) -> None:
    """Write new node rows and, in the same batch, the ``parents`` cell of their children
    (``parents`` maps child id -> parent id)."""
    rows = [client.mutate_row(serialize_uint64(n.node_id), encode_node(n)) for n in nodes]
    for child, parent in (parents or {}).items():
        rows.append(client.mutate_row(serialize_uint64(child), {PARENT: np.uint64(parent)}))
    if rows:
        client.write(rows)


def delete_node_ids(client: BigTableClient, ranges: Iterable[tuple[int, int]]) -> int:
    """Delete the node rows with ids in the inclusive ``ranges`` (a dead attempt's nodes;
    rows that were never written are no-ops). Returns how many keys were deleted."""
    rows = [
        RowMutationEntry(serialize_uint64(nid), [DeleteAllFromRow()])
        for first, last in ranges
        for nid in range(int(first), int(last) + 1)
    ]
    if rows:
        client.write(rows)
    return len(rows)
