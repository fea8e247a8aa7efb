"""Per-chunk claim (lock) and done marker in the graph's Bigtable table, through kvdbclient.

Rows are compatible with the predecessor's (DESIGN 4.2), so either can finish a graph the
other started: one row per chunk, key :func:`~shared.chunk_keys.chunk_row_key`, column family
``"0"``; the claim is kvdbclient's lock cell ``0:lock`` (value: the claimant's 64-bit token as
kvdbclient's ``UInt64String``), the done marker is ``0:chunk_done`` (presence means done; we
store the token that finished it).

Lock expiry lives on the kvdbclient client (``lock_expiry=``); build it per layer with
:func:`open_bigtable_client` so expiry exceeds the renewal interval with margin.

kvdbclient has no public read for arbitrary byte row keys, so reads (and the renewal, see
:meth:`ChunkLedger.renew`) use the client's data-API table, ``client._table``.
"""

from __future__ import annotations

import enum
import logging
import secrets
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from google.api_core.exceptions import AlreadyExists
from google.cloud.bigtable.data import ReadRowsQuery
from google.cloud.bigtable.data.row_filters import (
    CellsColumnLimitFilter,
    ColumnRangeFilter,
    RowFilterChain,
    ValueRangeFilter,
)
from kvdbclient import BigTableClient, BigTableConfig, attributes, serializers

from shared.chunk_keys import chunk_id_from_row_key, chunk_row_key

__all__ = [
    "CHUNK_DONE",
    "LOCK",
    "ChunkLedger",
    "ClaimResult",
    "chunk_row_key",
    "close_bigtable_client",
    "open_bigtable_client",
    "random_token",
]

log = logging.getLogger(__name__)

#: kvdbclient's lock column, ``0:lock``.
LOCK = attributes.Concurrency.Lock
#: The done marker, ``0:chunk_done`` (registering it also lets kvdbclient decode the column).
CHUNK_DONE = attributes._Attribute(
    key=b"chunk_done", family_id="0", serializer=serializers.UInt64String()
)
#: Written as the table version by ``open_bigtable_client(create=True)`` unless told otherwise.
DEFAULT_TABLE_VERSION = "cave-pipeline"
_MAX_KEYS_PER_READ = 10_000


class ClaimResult(enum.Enum):
    """Outcome of :meth:`ChunkLedger.claim`."""

    ACQUIRED = "acquired"
    ALREADY_DONE = "already_done"
    HELD_BY_OTHER = "held_by_other"


def random_token() -> int:
    """A fresh non-zero 64-bit claim token."""
    while True:
        token = secrets.randbits(64)
        if token:
            return token


def _column_filter(column: attributes._Attribute) -> ColumnRangeFilter:
    return ColumnRangeFilter(
        family_id=column.family_id,
        start_qualifier=column.key,
        end_qualifier=column.key,
        inclusive_start=True,
        inclusive_end=True,
    )


def _latest_cell(column: attributes._Attribute) -> RowFilterChain:
    return RowFilterChain([_column_filter(column), CellsColumnLimitFilter(1)])


class ChunkLedger:
    """Claim, renew, release and mark chunks done in one graph table.

    Args:
        client: a kvdbclient ``BigTableClient`` for the graph's table; its ``lock_expiry`` is
            the claim time-out. The ledger does not close it.
        stage: whose rows these are; each stage keeps its own (``chunk_row_key``).
    """

    def __init__(self, client: BigTableClient, stage: str = "ingest") -> None:
        self.client = client
        self.stage = stage

    def _key(self, chunk_id: int) -> bytes:
        return chunk_row_key(chunk_id, self.stage)

    @property
    def lock_expiry(self) -> timedelta:
        """The client's lock expiry: renew well within it."""
        return self.client._lock_expiry

    def claim(self, chunk_id: int, token: int) -> ClaimResult:
        """Try to take ``chunk_id`` for ``token``.

        A chunk already marked done is not locked. After acquiring, the done marker is read
        again, because another worker may have finished the chunk and released it between
        our first check and our lock; in that case the lock is released again.
        """
        if self.is_done(chunk_id):
            return ClaimResult.ALREADY_DONE
        key = self._key(chunk_id)
        if not self.client.lock_by_row_key(key, token):
            return ClaimResult.HELD_BY_OTHER
        try:
            done = self.is_done(chunk_id)
        except BaseException:
            self._release_quietly(key, token)
            raise
        if done:
            self.client.unlock_by_row_key(key, token)
            return ClaimResult.ALREADY_DONE
        return ClaimResult.ACQUIRED

    def renew(self, chunk_id: int, token: int) -> bool:
        """Refresh ``token``'s claim; False if it no longer holds the chunk.

        Succeeds only if the *newest* lock cell carries ``token``. kvdbclient's
        ``renew_lock_by_row_key`` matches any cell version with the token, and the lock family
        keeps old versions, so a holder whose lock lapsed and was taken over would still
        "renew" (and could then release the new holder's lock). This is the same atomic
        check-and-mutate with the predicate narrowed to the latest cell; the cell written is
        kvdbclient's own lock mutation.
        """
        predicate = RowFilterChain(
            [
                _latest_cell(LOCK),
                ValueRangeFilter(
                    start_value=LOCK.serialize(token),
                    end_value=LOCK.serialize(token),
                    inclusive_start=True,
                    inclusive_end=True,
                ),
            ]
        )
        return bool(
            self.client._table.check_and_mutate_row(
                self._key(chunk_id),
                predicate=predicate,
                true_case_mutations=self.client._set_lock_mutation(LOCK, token),
                operation_timeout=30.0,
            )
        )

    def mark_done(self, chunk_id: int, token: int) -> None:
        """Write the done marker (value ``token``), then release ``token``'s lock."""
        key = self._key(chunk_id)
        self.client.write([self.client.mutate_row(key, {CHUNK_DONE: token})])
        if not self.client.unlock_by_row_key(key, token):
            log.warning(
                "chunk %d marked done by token %d, whose lock had already lapsed or been taken",
                chunk_id,
                token,
            )

    def release(self, chunk_id: int, token: int) -> bool:
        """Release ``token``'s unexpired lock on ``chunk_id``; another holder's lock is left
        alone. Returns whether a lock was released."""
        return bool(self.client.unlock_by_row_key(self._key(chunk_id), token))

    def is_done(self, chunk_id: int) -> bool:
        """Whether ``chunk_id`` carries the done marker (whatever its value)."""
        row = self.client._table.read_row(self._key(chunk_id), row_filter=_latest_cell(CHUNK_DONE))
        return row is not None and len(row.cells) > 0

    def done_among(self, chunk_ids: Iterable[int]) -> set[int]:
        """The subset of ``chunk_ids`` marked done, read in one batched request (split only
        beyond 10,000 keys)."""
        keys = sorted({self._key(c) for c in chunk_ids})
        done: set[int] = set()
        for start in range(0, len(keys), _MAX_KEYS_PER_READ):
            query = ReadRowsQuery(
                row_keys=keys[start : start + _MAX_KEYS_PER_READ],
                row_filter=_latest_cell(CHUNK_DONE),
            )
            for row in self.client._table.read_rows(query):
                if row.cells:
                    done.add(chunk_id_from_row_key(row.row_key))
        return done

    def _release_quietly(self, key: bytes, token: int) -> None:
        try:
            self.client.unlock_by_row_key(key, token)
        except Exception:  # the original error matters more
            log.exception("could not release lock on row %s", key.hex())


def open_bigtable_client(
    table_id: str,
    project: str,
    instance: str,
    lock_expiry: timedelta,
    create: bool = False,
    *,
    meta: Any = None,
    version: str = DEFAULT_TABLE_VERSION,
) -> BigTableClient:
    """Build a kvdbclient ``BigTableClient`` for ``table_id`` with ``lock_expiry``.

    With ``create=True`` the table is created with kvdbclient's default column families (and
    ``meta``/``version`` written) unless it exists already. Honors ``BIGTABLE_EMULATOR_HOST``.
    Close the client with :func:`close_bigtable_client` (or ``client.close()``).
    """
    config = BigTableConfig(PROJECT=project, INSTANCE=instance, ADMIN=True, READ_ONLY=False)
    if create:
        creator = BigTableClient(table_id, config, lock_expiry=lock_expiry)
        try:
            creator.create_table(meta, version)
        except ValueError as exc:  # kvdbclient: "<table> already exists."
            if "already exists" not in str(exc):
                raise
        except AlreadyExists:  # lost a race with another creator
            pass
        finally:
            close_bigtable_client(creator)
    return BigTableClient(table_id, config, lock_expiry=lock_expiry)


def ensure_table(table_id: str, project: str, instance: str) -> None:
    """Create a graph table (kvdbclient's column families) unless it exists: the `setup`
    step, which every Job of the graph needs before its first claim."""
    close_bigtable_client(
        open_bigtable_client(table_id, project, instance, timedelta(seconds=60), create=True)
    )


def close_bigtable_client(client: BigTableClient) -> None:
    """Close the data client and, if kvdbclient created one, its admin client (which
    ``client.close()`` leaves open)."""
    client.close()
    admin_table = getattr(client, "_Client__admin_table", None)
    if admin_table is not None:
        try:
            admin_table._instance._client.close()
        except Exception:  # best effort
            log.debug("closing the Bigtable admin client failed", exc_info=True)
