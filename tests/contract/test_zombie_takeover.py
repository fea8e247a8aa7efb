"""A zombie never takes over its replacement's live claim (docs/zombies.md), on the Bigtable
emulator: a same-lineage claim is taken over only once its newest lock cell is older than the
takeover window, which a renewing claimant never lets happen; through the chaos machinery, a
zombie's claim of a chunk its live replacement holds is refused and counted so."""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud.bigtable.data.mutations import SetCell

from adapters import chaos_mailbox as mb
from adapters.bigtable.chunk_ledger import LOCK, ClaimResult
from adapters.bigtable.chunk_ledger import BigtableChunkLedger as ChunkLedger
from shared.chaos.chaos_audit import zombie_claims
from shared.model.claim_timing import takeover_after_s
from worker import chaos_points
from worker.claim_tokens import attempt_token, lineage, lineage_range
from worker.lock_keeper import LockKeeper
from worker.logs import JsonLogger

OWN = lineage("g", "ingest", 2, "r1", 7)
LINEAGE = lineage_range(OWN)
DEAD, REPLACEMENT, ZOMBIE = (attempt_token(OWN, bits) for bits in (1, 2, 3))
OTHER_INDEX = attempt_token(lineage("g", "ingest", 2, "r1", 8), 1)


def _claimed_ago(ledger: ChunkLedger, cid: int, token: int, age_s: float) -> None:
    """``token``'s lock cell as if its last claim or renewal was written ``age_s`` ago (the
    attempt then stopped renewing): kvdbclient's lock mutation with an older time stamp."""
    when = datetime.now(UTC) - timedelta(seconds=age_s)
    micros = int(when.timestamp() * 1e6) // 1000 * 1000
    cell = SetCell(LOCK.family_id, LOCK.key, LOCK.serialize(token), timestamp_micros=micros)
    ledger.client._table.mutate_row(ledger._key(cid), [cell])


@pytest.fixture
def ledger(bigtable_table: tuple[Any, str]) -> ChunkLedger:
    """The fixture's client: lock expiry 30 s, so renewals every 10 s, window 22 s."""
    return ChunkLedger(bigtable_table[0])


def test_the_window_against_the_expiry(ledger: ChunkLedger) -> None:
    assert ledger.lock_expiry == timedelta(seconds=30)
    assert ledger.takeover_after == timedelta(seconds=22)


@pytest.mark.parametrize(
    "age_s, taken",
    [(0.0, False), (10.5, False), (20.5, False), (23.5, True), (29.0, True)],
)
def test_a_same_lineage_claim_is_taken_only_once_unrenewed_for_the_window(
    ledger: ChunkLedger, age_s: float, taken: bool
) -> None:
    _claimed_ago(ledger, 1, DEAD, age_s)
    result = ledger.claim(1, REPLACEMENT, LINEAGE)
    assert result is (ClaimResult.TAKEN_OVER if taken else ClaimResult.HELD_BY_OTHER)
    holder = ledger.holder(1)
    assert holder is not None and holder.token == (REPLACEMENT if taken else DEAD)
    # another Job index never takes it over, however old (until it expires)
    assert ledger.claim(1, OTHER_INDEX, lineage_range(lineage("g", "ingest", 2, "r1", 8))) is (
        ClaimResult.HELD_BY_OTHER
    )


def test_a_renewing_claimant_keeps_its_claim_and_loses_it_once_it_stops(
    bigtable_table: tuple[Any, str], bigtable_client: Any
) -> None:
    """Expiry 3 s: renewals every 1 s, window 2.5 s. The replacement renews through the lock
    keeper for longer than the window: the zombie's takeovers are all refused. Once it
    stops renewing (it died), the claim is taken over within the window, before it expires."""
    _, table_id = bigtable_table
    ledger = ChunkLedger(bigtable_client(table_id, lock_expiry=timedelta(seconds=3)))
    window = ledger.takeover_after.total_seconds()
    assert window == takeover_after_s(3.0) == 2.5
    sent = time.monotonic()
    assert ledger.claim(2, REPLACEMENT, LINEAGE) is ClaimResult.ACQUIRED
    keeper = LockKeeper(ledger, REPLACEMENT, 3.0, JsonLogger(stream=io.StringIO()))
    keeper.hold(2, sent)
    keeper.start()
    try:
        deadline = time.monotonic() + window * 1.4
        tries = 0
        while time.monotonic() < deadline:
            assert ledger.claim(2, ZOMBIE, LINEAGE) is ClaimResult.HELD_BY_OTHER
            tries += 1
            time.sleep(0.1)
        assert tries > 10 and not keeper.lost and not keeper.expiring
    finally:
        keeper.stop()
    # A generous timeout: the claim expires 3 s after its last renewal whatever the load, and
    # TAKEN_OVER (not ACQUIRED) is what says it was taken within the window, before that.
    deadline = time.monotonic() + 60
    while (result := ledger.claim(2, DEAD, LINEAGE)) is ClaimResult.HELD_BY_OTHER:
        assert time.monotonic() < deadline, "never taken over"
        time.sleep(0.05)
    assert result is ClaimResult.TAKEN_OVER  # not ACQUIRED: taken before the claim expired
    assert not ledger.renew(2, REPLACEMENT)


@pytest.fixture
def zombie(tmp_path, monkeypatch):
    """This process as a lost node's zombie in a chaos run; ``os._exit`` raises instead."""
    monkeypatch.setenv(mb.CHAOS_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("HOSTNAME", "zombie-pod")
    monkeypatch.setattr(chaos_points, "_zombie", True)

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(chaos_points.os, "_exit", leave)
    return mb.mailbox(tmp_path)


class _Log:
    def warning(self, *a: Any, **k: Any) -> None:
        pass

    def flush(self) -> None:
        pass


def test_a_zombie_is_refused_its_replacements_live_claim_and_leaves(ledger, zombie):
    assert ledger.claim(3, REPLACEMENT, LINEAGE) is ClaimResult.ACQUIRED  # live, just claimed
    with pytest.raises(SystemExit):
        chaos_points.claim(ledger, 3, ZOMBIE, LINEAGE, _Log())
    (record,) = [r for r in mb.audit_records(zombie) if r["event"] == "zombie_claim"]
    assert record["result"] == "held_by_other" and record["live"] is True
    assert record["holder_token"] == REPLACEMENT and record["stage"] == "ingest"
    assert zombie_claims(mb.audit_records(zombie)).__dict__ == {"refused": 1, "live_taken": 0}
    assert ledger.renew(3, REPLACEMENT)  # the replacement keeps its claim


def test_a_zombie_may_take_a_dead_attempts_claim(ledger, zombie):
    _claimed_ago(ledger, 4, DEAD, 25.0)  # the replacement died too, long ago
    assert chaos_points.claim(ledger, 4, ZOMBIE, LINEAGE, _Log()) is ClaimResult.TAKEN_OVER
    (record,) = [r for r in mb.audit_records(zombie) if r["event"] == "zombie_claim"]
    assert record["live"] is False and record["holder_age_s"] >= 25.0
    assert zombie_claims(mb.audit_records(zombie)).__dict__ == {"refused": 0, "live_taken": 0}
