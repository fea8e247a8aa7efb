"""Per-chunk claim (lock) and done marker in the graph's Bigtable table, through kvdbclient.

Rows are compatible with the predecessor's (docs/job-and-worker-contract.md#ledger-rows), so
either can finish a graph the other started: one row per chunk, key
:func:`~shared.model.chunk_keys.chunk_row_key`, column family ``"0"``; the claim is kvdbclient's
lock cell ``0:lock`` (value: the claimant's 64-bit token as kvdbclient's ``UInt64String``), the done
marker is ``0:chunk_done`` (presence means done; we store the token that finished it). Added
cells, which the predecessor ignores: ``0:chunk_started`` (the token of the attempt that began
writing the chunk) and ``0:chunk_note`` (the workload's recovery note); both are cleared with
the done marker.

Fencing (docs/job-and-worker-contract.md#fencing): the done marker, the attempt record, the
note, renewals and releases are each one conditional mutation on "the newest lock cell carries
our token", so a worker whose claim was lost writes nothing. The done marker also requires the
claim to be live (not expired). A lapsed claim of a predecessor's worker is taken as kvdbclient
does (no live lock cell); a claim of an earlier attempt of the same Job index is taken over
before it expires, once its claimant has stopped renewing it (:meth:`BigtableChunkLedger.claim`
with ``lineage``; the window is ``shared.model.claim_timing.takeover_after_s``, docs/zombies.md).

Lock expiry lives on the kvdbclient client (``lock_expiry=``); build it per layer with
:func:`open_bigtable_client` so expiry exceeds the renewal interval with margin.

kvdbclient has no public read for arbitrary byte row keys, so reads (and the renewal, see
:meth:`BigtableChunkLedger.renew`) use the client's data-API table, ``client._table``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from google.cloud.bigtable.data import ReadRowsQuery
from google.cloud.bigtable.data.mutations import DeleteRangeFromColumn, SetCell
from google.cloud.bigtable.data.row_filters import RowFilterUnion
from kvdbclient import BigTableClient, attributes, serializers

from adapters.bigtable.client import (
    DEFAULT_TABLE_VERSION,
    close_bigtable_client,
    ensure_table,
    open_bigtable_client,
)
from adapters.bigtable.ledger_filters import (
    column_filter,
    held_by,
    held_in_range,
    latest_cell,
)
from adapters.bigtable.not_found import missing_table
from shared.model.chunk_keys import chunk_id_from_row_key, chunk_row_key
from shared.model.claim_timing import takeover_after_s
from shared.ports.chunk_ledger import ClaimResult, Holder, PriorAttempt

__all__ = [
    "CHUNK_DONE",
    "LOCK",
    "NOTE",
    "STARTED",
    "BigtableChunkLedger",
    "ClaimResult",
    "Holder",
    "PriorAttempt",
    "chunk_row_key",
    "DEFAULT_TABLE_VERSION",
    "close_bigtable_client",
    "ensure_table",
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
#: The attempt record: the token of the attempt that started writing the chunk (cleared by the
#: done marker), so a later attempt knows it must clean up after a dead one.
STARTED = attributes._Attribute(
    key=b"chunk_started", family_id="0", serializer=serializers.UInt64String()
)
#: The workload's recovery note (raw bytes; cleared by the done marker).
NOTE = attributes._Attribute(key=b"chunk_note", family_id="0", serializer=serializers.String())
_MAX_KEYS_PER_READ = 10_000


def random_token() -> int:
    """A fresh non-zero 64-bit claim token."""
    while True:
        token = secrets.randbits(64)
        if token:
            return token


class BigtableChunkLedger:
    """The chunk ledger (`shared.ports.chunk_ledger.ChunkLedger`) in one graph table.

    Every write made on behalf of a claim (done marker, attempt record, note, renewal,
    release) is one conditional mutation whose predicate is "the newest lock cell carries our
    token" (:mod:`~adapters.bigtable.ledger_filters`): a worker whose claim lapsed and
    was taken can no longer write anything.

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

    @property
    def takeover_after(self) -> timedelta:
        """How long a same-lineage claim must have gone unrenewed before :meth:`claim` takes
        it over (``shared.model.claim_timing.takeover_after_s`` of the lock expiry)."""
        return timedelta(seconds=takeover_after_s(self.lock_expiry.total_seconds()))

    def _fenced(self, chunk_id: int, token: int, mutations: list, live: bool = False) -> bool:
        """Apply ``mutations`` iff ``token`` holds the newest lock cell (and, with ``live``, it
        has not expired); one atomic check-and-mutate."""
        expiry = self.lock_expiry if live else None
        return bool(
            self.client._table.check_and_mutate_row(
                self._key(chunk_id),
                predicate=held_by(token, expiry),
                true_case_mutations=mutations,
                operation_timeout=30.0,
            )
        )

    def claim(
        self, chunk_id: int, token: int, lineage: tuple[int, int] | None = None
    ) -> ClaimResult:
        """Try to take ``chunk_id`` for ``token``.

        A chunk already marked done is not locked. With ``lineage`` (the inclusive token range
        of this Job index's attempts), an unexpired claim whose token is in that range is taken
        over once its newest lock cell is older than :attr:`takeover_after`: it belongs to an
        earlier attempt of the same index that stopped renewing (Kubernetes replaced it,
        ``podReplacementPolicy: Failed``). A claim of this lineage that is still renewed is
        left alone: its claimant is alive, e.g. our own replacement while we are a zombie of
        a lost node (docs/zombies.md). After acquiring, the done marker is read again,
        because another worker may have finished the chunk and released it between our first
        check and our lock; in that case the lock is released again.
        """
        if self.is_done(chunk_id):
            return ClaimResult.ALREADY_DONE
        key = self._key(chunk_id)
        result = ClaimResult.ACQUIRED
        if not self.client.lock_by_row_key(key, token):
            if lineage is None or not self._take_over(key, token, lineage):
                return ClaimResult.HELD_BY_OTHER
            result = ClaimResult.TAKEN_OVER
        try:
            done = self.is_done(chunk_id)
        except BaseException:
            self._release_quietly(chunk_id, token)
            raise
        if done:
            self.release(chunk_id, token)
            return ClaimResult.ALREADY_DONE
        return result

    def _take_over(self, key: bytes, token: int, lineage: tuple[int, int]) -> bool:
        """Take a same-lineage claim whose claimant stopped renewing: one check-and-mutate,
        so no renewal can slip between the check and the take."""
        low, high = lineage
        return bool(
            self.client._table.check_and_mutate_row(
                key,
                predicate=held_in_range(low, high, older_than=self.takeover_after),
                true_case_mutations=self.client._set_lock_mutation(LOCK, token),
                operation_timeout=30.0,
            )
        )

    def renew(self, chunk_id: int, token: int) -> bool:
        """Refresh ``token``'s claim; False if it no longer holds the chunk (the newest lock
        cell is another token's, or the lock is gone). The cell written is kvdbclient's own
        lock mutation."""
        return self._fenced(chunk_id, token, [self.client._set_lock_mutation(LOCK, token)])

    def mark_done(self, chunk_id: int, token: int) -> bool:
        """Fenced done marker: iff ``token`` still holds a live claim, write ``chunk_done``
        (value ``token``) and clear the claim and the attempt record, in one conditional
        mutation. False: the claim was lost and nothing was written."""
        mutations = [
            SetCell(CHUNK_DONE.family_id, CHUNK_DONE.key, CHUNK_DONE.serialize(token)),
            DeleteRangeFromColumn(LOCK.family_id, LOCK.key),
            DeleteRangeFromColumn(STARTED.family_id, STARTED.key),
            DeleteRangeFromColumn(NOTE.family_id, NOTE.key),
        ]
        return self._fenced(chunk_id, token, mutations, live=True)

    def begin(self, chunk_id: int, token: int) -> bool:
        """Record that ``token``'s attempt starts writing (``chunk_started``), fenced. Read the
        prior attempt (:meth:`prior_attempt`) first: this overwrites its record."""
        cell = SetCell(STARTED.family_id, STARTED.key, STARTED.serialize(token))
        return self._fenced(chunk_id, token, [cell])

    def save_note(self, chunk_id: int, token: int, note: bytes) -> bool:
        """Store the workload's recovery note (e.g. the node ids it is about to write) in the
        chunk's row, fenced; a later attempt reads it in :meth:`prior_attempt`."""
        return self._fenced(chunk_id, token, [SetCell(NOTE.family_id, NOTE.key, bytes(note))])

    def prior_attempt(self, chunk_id: int, token: int) -> PriorAttempt | None:
        """The unfinished earlier attempt of ``chunk_id`` (read while ``token`` holds it), or
        None if there was none: no ``chunk_started`` cell and no lock cell of another token.
        A chunk whose done marker was written has no attempt record (:meth:`mark_done`
        clears it)."""
        row = self.client._table.read_row(
            self._key(chunk_id),
            row_filter=RowFilterUnion(
                [latest_cell(STARTED), latest_cell(NOTE), column_filter(LOCK)]
            ),
        )
        started = note = None
        others: list[int] = []
        for cell in row.cells if row is not None else []:
            if cell.qualifier == STARTED.key and started is None:
                started = int(STARTED.deserialize(cell.value))
            elif cell.qualifier == NOTE.key and note is None:
                note = bytes(cell.value)
            elif cell.qualifier == LOCK.key:
                value = int(LOCK.deserialize(cell.value))
                if value != token:
                    others.append(value)
        if started is None and not others and note is None:
            return None
        return PriorAttempt(started if started is not None else (others or [None])[0], note)

    def release(self, chunk_id: int, token: int) -> bool:
        """Release ``token``'s claim on ``chunk_id``; another holder's claim is left alone (see
        :mod:`~adapters.bigtable.ledger_filters`). Returns whether one was released."""
        return self._fenced(chunk_id, token, [DeleteRangeFromColumn(LOCK.family_id, LOCK.key)])

    def holder(self, chunk_id: int) -> Holder | None:
        """The chunk's newest lock cell (None: no claim, e.g. released or done)."""
        row = self.client._table.read_row(self._key(chunk_id), row_filter=latest_cell(LOCK))
        for cell in row.cells if row is not None else []:
            when = datetime.fromtimestamp(cell.timestamp_micros / 1e6, UTC)
            return Holder(int(LOCK.deserialize(cell.value)), when)
        return None

    def is_done(self, chunk_id: int) -> bool:
        """Whether ``chunk_id`` carries the done marker (whatever its value)."""
        row = self.client._table.read_row(self._key(chunk_id), row_filter=latest_cell(CHUNK_DONE))
        return row is not None and len(row.cells) > 0

    def done_among(self, chunk_ids: Iterable[int]) -> set[int]:
        """The subset of ``chunk_ids`` marked done, read in one batched request (split only
        beyond 10,000 keys)."""
        keys = sorted({self._key(c) for c in chunk_ids})
        done: set[int] = set()
        for start in range(0, len(keys), _MAX_KEYS_PER_READ):
            query = ReadRowsQuery(
                row_keys=keys[start : start + _MAX_KEYS_PER_READ],
                row_filter=latest_cell(CHUNK_DONE),
            )
            for row in self.client._table.read_rows(query):
                if row.cells:
                    done.add(chunk_id_from_row_key(row.row_key))
        return done

    def newest_done_at(self, chunk_ids: Iterable[int]) -> datetime | None:
        """When the newest done marker among ``chunk_ids`` was written (its cell's
        timestamp), None if none is marked: a batch's progress, whoever wrote the markers."""
        keys = sorted({self._key(c) for c in chunk_ids})
        newest: int | None = None
        for start in range(0, len(keys), _MAX_KEYS_PER_READ):
            query = ReadRowsQuery(
                row_keys=keys[start : start + _MAX_KEYS_PER_READ],
                row_filter=latest_cell(CHUNK_DONE),
            )
            for row in self.client._table.read_rows(query):
                for cell in row.cells:
                    newest = max(newest or 0, cell.timestamp_micros)
        if newest is None:
            return None
        return datetime.fromtimestamp(newest / 1e6, UTC)

    def table_missing(self, exc: BaseException) -> bool:
        """Whether ``exc`` says a table or the instance does not exist (Bigtable's NotFound,
        from the ledger or from a workload's reads and writes, a bulk write's included)."""
        return missing_table(exc) is not None

    def missing_table(self, exc: BaseException) -> str | None:
        """The table ``exc`` says does not exist ("" if it names none; None: not that)."""
        return missing_table(exc)

    def _release_quietly(self, chunk_id: int, token: int) -> None:
        try:
            self.release(chunk_id, token)
        except Exception:  # the original error matters more
            log.exception("could not release the claim on chunk %d", chunk_id)
