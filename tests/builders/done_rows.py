"""Done markers written in bulk, as finished workers leave them (for the completeness check's
contract tests and benchmark): one `chunk_done` cell per chunk row, mutations batched."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.cloud.bigtable.data import RowMutationEntry
from google.cloud.bigtable.data.mutations import SetCell

from adapters.bigtable.chunk_ledger import CHUNK_DONE, LOCK
from shared.model.chunk_keys import chunk_row_key

BATCH = 5_000  # rows per bulk mutation


def write_done_markers(
    client: Any, chunk_ids: Iterable[int], stage: str = "ingest", token: int = 1
) -> int:
    """Mark `chunk_ids` done for `stage` in `client`'s table; how many rows were written."""
    cell = CHUNK_DONE.serialize(token)
    entries = [
        RowMutationEntry(chunk_row_key(c, stage), [SetCell("0", CHUNK_DONE.key, cell)])
        for c in chunk_ids
    ]
    for start in range(0, len(entries), BATCH):
        client._table.bulk_mutate_rows(entries[start : start + BATCH], operation_timeout=600)
    return len(entries)


def write_claims(client: Any, chunk_ids: Iterable[int], token: int = 7) -> None:
    """A live claim (lock cell) but no done marker on each of `chunk_ids` (ingest rows)."""
    entries = [
        RowMutationEntry(chunk_row_key(c), [SetCell("0", LOCK.key, LOCK.serialize(token))])
        for c in chunk_ids
    ]
    client._table.bulk_mutate_rows(entries)
