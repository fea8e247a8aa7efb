"""Every done marker of a stage, read from the graph's table by key-range scans.

The ledger's row keys start with a 2-byte digest (`shared.model.chunk_keys`), so one layer's chunks
are spread over the whole key space and no key range holds a layer. The scan therefore cuts
the key space into `shards` ranges by that prefix and reads them concurrently, with a filter
that returns only the newest `chunk_done` cell, value stripped: rows without a done marker
(the graph's own rows, claims, other stages' attempt records) come back as nothing, and a
done row costs a key. The stage is told apart by the key's suffix (ingest: none). One scan
serves every layer of a stage (`shared.reconcile.completeness` splits the ids by layer); see
docs/verify.md for the rates measured.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np
from google.cloud.bigtable.data import ReadRowsQuery, RowRange
from google.cloud.bigtable.data.row_filters import RowFilterChain, StripValueTransformerFilter
from kvdbclient import BigTableClient

from adapters.bigtable.chunk_ledger import (
    CHUNK_DONE,
    close_bigtable_client,
    open_bigtable_client,
)
from adapters.bigtable.ledger_filters import latest_cell
from shared.model.chunk_keys import ROW_KEY_LENGTH

if TYPE_CHECKING:
    from shared.config.config import PipelineConfig

__all__ = ["DEFAULT_SHARDS", "done_chunk_ids", "key_ranges", "scan_done_markers"]

DEFAULT_SHARDS = 16
_PREFIX_SPACE = 1 << 16  # the 2-byte digest prefix
_SCAN_TIMEOUT_S = 600.0  # one shard's scan: a million rows at emulator speed, with room


def key_ranges(shards: int) -> list[RowRange]:
    """`shards` contiguous row ranges covering the whole key space, cut at 2-byte prefixes."""
    if not 1 <= shards <= _PREFIX_SPACE:
        raise ValueError(f"shards: {shards}; valid 1..{_PREFIX_SPACE}")
    cuts = [(_PREFIX_SPACE * i // shards).to_bytes(2, "big") for i in range(1, shards)]
    starts: list[bytes | None] = [None, *cuts]
    ends: list[bytes | None] = [*cuts, None]
    return [RowRange(start_key=s, end_key=e) for s, e in zip(starts, ends, strict=True)]


def _scan(table, row_range: RowRange, stage: str) -> np.ndarray:  # noqa: ANN001 - data-API table
    query = ReadRowsQuery(
        row_ranges=[row_range],
        row_filter=RowFilterChain([latest_cell(CHUNK_DONE), StripValueTransformerFilter(True)]),
    )
    suffix = b"" if stage == "ingest" else b"/" + stage.encode()
    length = ROW_KEY_LENGTH + len(suffix)
    ids: list[int] = []
    for row in table.read_rows_stream(query, operation_timeout=_SCAN_TIMEOUT_S):
        key = row.row_key
        # Another stage's rows share the prefix space; their keys end otherwise.
        if len(key) == length and key.endswith(suffix):
            ids.append(int.from_bytes(key[2:ROW_KEY_LENGTH], "big"))
    return np.array(ids, dtype=np.uint64)


def done_chunk_ids(client: BigTableClient, stage: str, shards: int = DEFAULT_SHARDS) -> np.ndarray:
    """The chunk ids of `stage` carrying a done marker in `client`'s table (uint64, any
    order), read in `shards` key ranges at once."""
    table = client._table  # kvdbclient has no public read of arbitrary byte keys
    ranges = key_ranges(shards)
    with ThreadPoolExecutor(max_workers=min(shards, 8)) as pool:
        parts = list(pool.map(lambda r: _scan(table, r, stage), ranges))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)


def scan_done_markers(cfg: PipelineConfig, stage: str) -> np.ndarray:
    """:func:`done_chunk_ids` of `stage` in the graph table of `cfg` (a client opened and
    closed around the read): the controller's and `pipeline verify`'s
    `shared.reconcile.completeness.DoneMarkerScan`."""
    client = open_bigtable_client(
        cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance, timedelta(minutes=1)
    )
    try:
        return done_chunk_ids(client, stage)
    finally:
        close_bigtable_client(client)
