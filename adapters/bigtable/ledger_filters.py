"""Bigtable row filters of the chunk ledger: "the claim is held by this token", "by a token
in this range", "the newest cell of a column".

Every predicate looks at the *newest* lock cell only. kvdbclient's own row-key filters match
any cell version carrying the token, and the lock family keeps old versions, so a holder
whose lock lapsed and was taken over would still match them (and could then renew, release
or mark done under the new holder).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.cloud.bigtable.data.row_filters import (
    CellsColumnLimitFilter,
    ColumnRangeFilter,
    RowFilterChain,
    TimestampRangeFilter,
    ValueRangeFilter,
)
from kvdbclient import attributes

__all__ = ["column_filter", "held_by", "held_in_range", "latest_cell"]

LOCK = attributes.Concurrency.Lock


def column_filter(column: attributes._Attribute) -> ColumnRangeFilter:
    """Exactly ``column`` (range filters: the emulator's regex filters are slow)."""
    return ColumnRangeFilter(
        family_id=column.family_id,
        start_qualifier=column.key,
        end_qualifier=column.key,
        inclusive_start=True,
        inclusive_end=True,
    )


def latest_cell(column: attributes._Attribute) -> RowFilterChain:
    """The newest cell of ``column``."""
    return RowFilterChain([column_filter(column), CellsColumnLimitFilter(1)])


def _cutoff(expiry: timedelta) -> datetime:
    cutoff = datetime.now(UTC) - expiry
    # Bigtable time ranges have millisecond resolution.
    return cutoff - timedelta(microseconds=cutoff.microsecond % 1000)


def held_in_range(
    low: int,
    high: int,
    expiry: timedelta | None = None,
    older_than: timedelta | None = None,
) -> RowFilterChain:
    """Matches iff the newest lock cell's token is in ``[low, high]`` (and, with ``expiry``,
    was written less than ``expiry`` ago: the claim has not lapsed; with ``older_than``, was
    written at least that long ago: its claimant stopped renewing). Tokens are stored as
    20-digit zero-padded decimals, so byte order is numeric order. Both times compare the
    cell's time stamp (the writer's clock) with this host's clock (docs/zombies.md)."""
    chain = [latest_cell(LOCK)]
    if expiry is not None:
        chain.append(TimestampRangeFilter(start=_cutoff(expiry)))
    if older_than is not None:
        chain.append(TimestampRangeFilter(end=_cutoff(older_than)))
    chain.append(
        ValueRangeFilter(
            start_value=LOCK.serialize(low),
            end_value=LOCK.serialize(high),
            inclusive_start=True,
            inclusive_end=True,
        )
    )
    return RowFilterChain(chain)


def held_by(token: int, expiry: timedelta | None = None) -> RowFilterChain:
    """Matches iff the newest lock cell carries ``token`` (and, with ``expiry``, is live)."""
    return held_in_range(token, token, expiry)
