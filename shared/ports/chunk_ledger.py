"""The chunk ledger port: per-chunk claims and done markers in a graph's table, as the worker
harness, the completeness checks and the chaos audit use them. Pure module: the Protocol and
its value types; the adapter is `adapters.bigtable.chunk_ledger.BigtableChunkLedger`
(docs/ports-and-wiring.md). No client library's exception crosses it: `table_missing` says
whether an error means a table (or the instance) does not exist, `missing_table` which.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol


class ClaimResult(enum.Enum):
    """Outcome of :meth:`ChunkLedger.claim`."""

    ACQUIRED = "acquired"
    #: Acquired from an unexpired claim of an earlier attempt of the same Job index (see
    #: ``worker.claim_tokens``) that was not renewed within the takeover window: that attempt
    #: stopped renewing (its pod is terminal), so the claim is ours before it expires.
    TAKEN_OVER = "taken_over"
    ALREADY_DONE = "already_done"
    HELD_BY_OTHER = "held_by_other"


@dataclass(frozen=True)
class PriorAttempt:
    """What an earlier, unfinished attempt of a chunk left in its ledger row.

    ``token``: that attempt's claim token (from its ``chunk_started`` cell, or from a lock cell
    of another token: a predecessor's attempt writes no ``chunk_started``); ``note``: the
    workload's recovery note (:meth:`ChunkLedger.save_note`), None if it saved none.
    """

    token: int | None
    note: bytes | None


@dataclass(frozen=True)
class Holder:
    """A chunk's newest lock cell: whose token, and when it was written (the writer's
    clock; a lapsed claim is still reported)."""

    token: int
    written_at: datetime


class ChunkLedger(Protocol):
    """Claim, renew, release and mark chunks done; every write on behalf of a claim is fenced
    on the claim's token (a worker whose claim lapsed and was taken writes nothing)."""

    @property
    def lock_expiry(self) -> timedelta:
        """The claim time-out: renew well within it."""

    def claim(
        self, chunk_id: int, token: int, lineage: tuple[int, int] | None = None
    ) -> ClaimResult:
        """Try to take ``chunk_id`` for ``token`` (``lineage``: the token range of this Job
        index's attempts, whose live claims are taken over at once)."""

    def renew(self, chunk_id: int, token: int) -> bool:
        """Refresh ``token``'s claim; False if it no longer holds the chunk."""

    def mark_done(self, chunk_id: int, token: int) -> bool:
        """Write the done marker while ``token``'s claim is live; False if it is not."""

    def begin(self, chunk_id: int, token: int) -> bool:
        """Record that ``token``'s attempt starts writing the chunk."""

    def save_note(self, chunk_id: int, token: int, note: bytes) -> bool:
        """Keep the workload's recovery note for a later attempt."""

    def prior_attempt(self, chunk_id: int, token: int) -> PriorAttempt | None:
        """The unfinished earlier attempt of ``chunk_id``, if any."""

    def release(self, chunk_id: int, token: int) -> bool:
        """Release ``token``'s claim; another holder's claim is left alone."""

    def is_done(self, chunk_id: int) -> bool:
        """Whether ``chunk_id`` carries the done marker."""

    def done_among(self, chunk_ids: Iterable[int]) -> set[int]:
        """The subset of ``chunk_ids`` marked done."""

    def newest_done_at(self, chunk_ids: Iterable[int]) -> datetime | None:
        """When the newest done marker among ``chunk_ids`` was written (None: none)."""

    def holder(self, chunk_id: int) -> Holder | None:
        """The chunk's newest lock cell, lapsed or not (None: never claimed)."""

    @property
    def takeover_after(self) -> timedelta:
        """How long a same-lineage claim must go unrenewed before it is taken over."""

    def table_missing(self, exc: BaseException) -> bool:
        """Whether ``exc`` (from the ledger, or from a workload's reads and writes) says a
        table or the instance does not exist: a fatal error, not a retry."""

    def missing_table(self, exc: BaseException) -> str | None:
        """The table ``exc`` says does not exist ("" when it names none, e.g. the instance's;
        None when ``exc`` says no such thing): a pass's own table is often not the graph's."""
