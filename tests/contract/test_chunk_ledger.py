"""The per-chunk ledger against the Bigtable emulator, through kvdbclient."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud.bigtable.data.mutations import SetCell

from adapters.bigtable.chunk_ledger import (
    CHUNK_DONE,
    LOCK,
    BigtableChunkLedger,
    chunk_row_key,
    random_token,
)
from shared.ports.chunk_ledger import ClaimResult

A, B = 0x1111_2222_3333_4444, 0xFFFF_0000_FFFF_0001  # B > 2**63: full uint64 range


def _cells(ledger: BigtableChunkLedger, chunk_id: int, qualifier: bytes) -> list[Any]:
    row = ledger.client._table.read_row(chunk_row_key(chunk_id))
    return [c for c in (row.cells if row else []) if c.family == "0" and c.qualifier == qualifier]


@pytest.fixture
def ledger(bigtable_table: tuple[Any, str]) -> BigtableChunkLedger:
    client, _ = bigtable_table
    return BigtableChunkLedger(client)


def test_claim_done_then_already_done(ledger: BigtableChunkLedger) -> None:
    assert ledger.claim(7, A) is ClaimResult.ACQUIRED
    assert not ledger.is_done(7)
    ledger.mark_done(7, A)
    assert ledger.is_done(7)
    assert ledger.claim(7, A) is ClaimResult.ALREADY_DONE
    assert ledger.claim(7, B) is ClaimResult.ALREADY_DONE


def test_rows_are_predecessor_compatible(ledger: BigtableChunkLedger) -> None:
    assert ledger.claim(2**40 + 3, A) is ClaimResult.ACQUIRED
    (lock,) = _cells(ledger, 2**40 + 3, b"lock")
    assert lock.value == LOCK.serialize(A) == b"%020d" % A
    ledger.mark_done(2**40 + 3, A)
    assert _cells(ledger, 2**40 + 3, b"lock") == []
    (done,) = _cells(ledger, 2**40 + 3, b"chunk_done")
    assert CHUNK_DONE.deserialize(done.value) == A


def test_contention_and_release(ledger: BigtableChunkLedger) -> None:
    assert ledger.claim(1, A) is ClaimResult.ACQUIRED
    assert ledger.claim(1, B) is ClaimResult.HELD_BY_OTHER
    assert ledger.claim(1, A) is ClaimResult.HELD_BY_OTHER  # not re-entrant
    assert ledger.release(1, B) is False  # a non-holder cannot release
    assert ledger.claim(1, B) is ClaimResult.HELD_BY_OTHER
    assert ledger.release(1, A) is True
    assert ledger.claim(1, B) is ClaimResult.ACQUIRED
    assert ledger.claim(2, A) is ClaimResult.ACQUIRED  # chunks are independent


def test_renew_only_by_holder(ledger: BigtableChunkLedger) -> None:
    assert not ledger.renew(3, A)  # nothing to renew
    assert ledger.claim(3, A) is ClaimResult.ACQUIRED
    assert ledger.renew(3, A)
    assert ledger.renew(3, A)
    assert not ledger.renew(3, B)
    assert ledger.claim(3, B) is ClaimResult.HELD_BY_OTHER
    ledger.release(3, A)
    assert not ledger.renew(3, A)  # released claims cannot be revived


def test_expired_lock_can_be_taken_over(
    bigtable_table: tuple[Any, str], bigtable_client: Callable[..., Any]
) -> None:
    _, table_id = bigtable_table
    ledger = BigtableChunkLedger(bigtable_client(table_id, lock_expiry=timedelta(seconds=1)))
    assert ledger.lock_expiry == timedelta(seconds=1)
    assert ledger.claim(4, A) is ClaimResult.ACQUIRED
    assert ledger.claim(4, B) is ClaimResult.HELD_BY_OTHER
    time.sleep(1.5)
    assert ledger.claim(4, B) is ClaimResult.ACQUIRED
    # the stale holder must learn it lost the chunk, and must not disturb the new holder
    assert not ledger.renew(4, A)
    assert ledger.release(4, A) is False
    assert ledger.claim(4, A) is ClaimResult.HELD_BY_OTHER
    assert ledger.renew(4, B)
    ledger.mark_done(4, B)
    assert ledger.claim(4, A) is ClaimResult.ALREADY_DONE


def test_done_marker_found_after_lock_race(ledger: BigtableChunkLedger) -> None:
    # a chunk finished (done, lock released) by another worker between our check and lock
    ledger.client.write([ledger.client.mutate_row(chunk_row_key(5), {CHUNK_DONE: B})])
    assert ledger.claim(5, A) is ClaimResult.ALREADY_DONE
    assert _cells(ledger, 5, b"lock") == []  # and our lock was released again


def test_done_among(ledger: BigtableChunkLedger) -> None:
    ids = list(range(1000, 1300))
    done = set(ids[::7]) | {2**64 - 1}
    for chunk_id in done:
        assert ledger.claim(chunk_id, A) is ClaimResult.ACQUIRED
        ledger.mark_done(chunk_id, A)
    assert ledger.claim(ids[1], A) is ClaimResult.ACQUIRED  # locked is not done
    assert ledger.done_among(ids + [2**64 - 1, 2**64 - 2]) == done
    assert ledger.done_among([]) == set()
    assert ledger.done_among(ids[:3] * 2) == {ids[0]}


def test_newest_done_at_is_the_newest_markers_write_time(ledger: BigtableChunkLedger) -> None:
    ids = [7, 8, 9]
    assert ledger.newest_done_at(ids) is None  # nothing marked yet
    before = datetime.now(UTC) - timedelta(seconds=1)  # Bigtable times: milliseconds
    for chunk_id in ids[:2]:
        assert ledger.claim(chunk_id, A) is ClaimResult.ACQUIRED
        assert ledger.mark_done(chunk_id, A)
        time.sleep(0.01)
    after = datetime.now(UTC) + timedelta(seconds=1)
    newest = ledger.newest_done_at(ids)
    assert newest is not None and before <= newest <= after
    first = ledger.newest_done_at(ids[:1])
    assert first is not None and first < newest  # the newest of the window, not any
    assert ledger.claim(9, A) is ClaimResult.ACQUIRED  # a claim is no progress
    assert ledger.newest_done_at(ids) == newest


def test_random_token() -> None:
    tokens = {random_token() for _ in range(1000)}
    assert len(tokens) == 1000
    assert all(0 < t < 2**64 for t in tokens)


def test_stages_keep_separate_done_markers(bigtable_table):
    client, _ = bigtable_table
    ingest, meshing = BigtableChunkLedger(client), BigtableChunkLedger(client, "meshing")
    ingest.claim(7, 1)
    ingest.mark_done(7, 1)
    assert meshing.claim(7, 2) is ClaimResult.ACQUIRED  # ingest's marker is not meshing's
    meshing.mark_done(7, 2)
    assert ingest.done_among([7, 8]) == meshing.done_among([7, 8]) == {7}


# ----------------------------------------- fencing (docs/job-and-worker-contract.md#fencing)


def test_done_marker_is_fenced_on_a_live_claim(
    bigtable_table: tuple[Any, str], bigtable_client: Callable[..., Any]
) -> None:
    _, table_id = bigtable_table
    ledger = BigtableChunkLedger(bigtable_client(table_id, lock_expiry=timedelta(seconds=1)))
    assert not ledger.mark_done(20, A)  # never claimed: nothing written
    assert not ledger.is_done(20)
    assert ledger.claim(20, A) is ClaimResult.ACQUIRED
    time.sleep(1.5)  # A's claim lapses ...
    assert not ledger.mark_done(20, A)  # ... so A may no longer mark it, even untaken
    assert ledger.claim(20, B) is ClaimResult.ACQUIRED
    assert not ledger.mark_done(20, A)  # taken: A's done marker is refused
    assert not ledger.is_done(20)
    assert _cells(ledger, 20, b"lock")  # and B's claim is intact
    assert ledger.renew(20, B) and ledger.mark_done(20, B)
    assert ledger.is_done(20)
    assert _cells(ledger, 20, b"lock") == []


def test_a_lapsed_holder_cannot_release_the_new_holders_claim(
    bigtable_table: tuple[Any, str], bigtable_client: Callable[..., Any]
) -> None:
    _, table_id = bigtable_table
    ledger = BigtableChunkLedger(bigtable_client(table_id, lock_expiry=timedelta(seconds=1)))
    assert ledger.claim(21, A) is ClaimResult.ACQUIRED
    ledger.renew(21, A)  # two cells of A: kvdbclient's filters would match the old one
    time.sleep(1.5)
    assert ledger.claim(21, B) is ClaimResult.ACQUIRED
    assert ledger.release(21, A) is False
    assert ledger.claim(21, A) is ClaimResult.HELD_BY_OTHER


def test_takeover_only_within_the_lineage(ledger: BigtableChunkLedger) -> None:
    lineage = (A & ~0xFFFFFF, A | 0xFFFFFF)  # A's index (worker.claim_tokens: 24 bits)
    sibling = (A & ~0xFFFFFF) | 0x42  # another attempt of A's index
    # A claimed 25 s ago and stopped renewing: past the 22 s takeover window of the 30 s
    # expiry, not yet expired (docs/zombies.md; tests/contract/test_zombie_takeover.py)
    old = (int(time.time() * 1e6) - 25_000_000) // 1000 * 1000
    ledger.client._table.mutate_row(
        chunk_row_key(30), [SetCell(LOCK.family_id, LOCK.key, LOCK.serialize(A), old)]
    )
    b_lineage = (B & ~0xFFFFFF, B | 0xFFFFFF)
    assert ledger.claim(30, B, b_lineage) is ClaimResult.HELD_BY_OTHER  # another index
    assert ledger.claim(30, sibling) is ClaimResult.HELD_BY_OTHER  # no lineage: waits
    assert ledger.claim(30, sibling, lineage) is ClaimResult.TAKEN_OVER
    assert not ledger.renew(30, A) and not ledger.mark_done(30, A)  # A is fenced out
    assert ledger.mark_done(30, sibling)
    assert ledger.claim(30, A, lineage) is ClaimResult.ALREADY_DONE


def test_attempt_record_and_note(ledger: BigtableChunkLedger) -> None:
    assert ledger.claim(40, A) is ClaimResult.ACQUIRED
    assert ledger.prior_attempt(40, A) is None  # a fresh chunk
    assert ledger.begin(40, A) and ledger.save_note(40, A, b"ids 1-9")
    assert not ledger.save_note(40, B, b"x") and not ledger.begin(40, B)  # fenced
    ledger.release(40, A)  # e.g. the plugin raised after writing
    assert ledger.claim(40, B) is ClaimResult.ACQUIRED
    prior = ledger.prior_attempt(40, B)
    assert prior is not None and prior.token == A and prior.note == b"ids 1-9"
    assert ledger.begin(40, B)
    assert ledger.mark_done(40, B)
    for cell in (b"chunk_started", b"chunk_note", b"lock"):  # done clears the record
        assert _cells(ledger, 40, cell) == []


def test_a_predecessor_attempt_that_died_is_seen_through_its_lock_cell(
    bigtable_table: tuple[Any, str], bigtable_client: Callable[..., Any]
) -> None:
    """The predecessor writes no chunk_started; its dead claim's lock cell tells instead."""
    _, table_id = bigtable_table
    ledger = BigtableChunkLedger(bigtable_client(table_id, lock_expiry=timedelta(seconds=1)))
    assert ledger.client.lock_by_row_key(chunk_row_key(50), A)  # kvdbclient, as it does
    time.sleep(1.5)
    assert ledger.claim(50, B) is ClaimResult.ACQUIRED
    prior = ledger.prior_attempt(50, B)
    assert prior is not None and prior.token == A and prior.note is None


def test_a_predecessor_can_finish_what_we_started(ledger: BigtableChunkLedger) -> None:
    """Our rows in its eyes: a released claim is free to kvdbclient, our done marker is a
    `chunk_done` cell."""
    assert ledger.claim(60, A) is ClaimResult.ACQUIRED and ledger.begin(60, A)
    ledger.release(60, A)
    key = chunk_row_key(60)
    assert ledger.client.lock_by_row_key(key, B)  # the predecessor's claim
    ledger.client.write([ledger.client.mutate_row(key, {CHUNK_DONE: B})])
    assert ledger.claim(60, A) is ClaimResult.ALREADY_DONE
