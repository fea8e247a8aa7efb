"""The lock keeper against the Bigtable emulator: renewals keep a claim, renewals that raise
count towards loss, a lost or expiring claim is cancelled, logged as ``claim_lost`` and, if
its chunk still runs, ends the pod before the claim can lapse."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import timedelta
from typing import Any

from adapters.bigtable.chunk_ledger import LOCK, BigtableChunkLedger
from shared.ports.chunk_ledger import ClaimResult
from worker.lock_keeper import CLAIM_LOST, LockKeeper
from worker.logs import JsonLogger

A, B = 0x1111_2222_3333_4444, 0x5555_6666_7777_8888
EXPIRY = 1.2


def _keeper(ledger: BigtableChunkLedger) -> tuple[LockKeeper, io.StringIO, dict[str, list[int]]]:
    out = io.StringIO()
    calls: dict[str, list[int]] = {"expiring": [], "overdue": []}
    keeper = LockKeeper(
        ledger,
        A,
        EXPIRY,
        JsonLogger(stream=out),
        on_expiring=calls["expiring"].append,
        on_overdue=calls["overdue"].append,
    )
    return keeper, out, calls


def _records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def _wait(cond: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def _ledger(
    bigtable_table, bigtable_client, kind: type[BigtableChunkLedger] = BigtableChunkLedger
) -> BigtableChunkLedger:
    """The ledger on the emulator's table; `kind`: a subclass whose renewals fail (a fault
    injected by subclassing, not by replacing a method)."""
    _, table_id = bigtable_table
    return kind(bigtable_client(table_id, lock_expiry=timedelta(seconds=EXPIRY)))


def test_renewals_keep_the_claim_past_its_expiry(bigtable_table, bigtable_client):
    ledger = _ledger(bigtable_table, bigtable_client)
    keeper, out, calls = _keeper(ledger)
    sent = time.monotonic()
    assert ledger.claim(1, A) is ClaimResult.ACQUIRED
    cancel = keeper.hold(1, sent)
    keeper.start()
    try:
        deadline = time.monotonic() + 3 * EXPIRY
        while time.monotonic() < deadline:
            assert ledger.claim(1, B) is ClaimResult.HELD_BY_OTHER
            time.sleep(0.1)
        assert not cancel.is_set() and calls == {"expiring": [], "overdue": []}
        assert ledger.mark_done(1, A)
    finally:
        keeper.stop()


def test_renewals_that_raise_end_the_attempt_before_the_claim_lapses(
    bigtable_table, bigtable_client
):
    renewed: list[float] = []

    class Unreachable(BigtableChunkLedger):
        def renew(self, chunk_id: int, token: int) -> bool:
            renewed.append(time.monotonic())
            raise ConnectionError("Bigtable unreachable")

    ledger = _ledger(bigtable_table, bigtable_client, Unreachable)
    out = io.StringIO()
    calls: dict[str, list[int]] = {"expiring": [], "overdue": []}
    # What another worker's claim meets at the moment the keeper acts: the claim not lapsed
    # yet (an event, not a wall-clock bound that a loaded machine breaks).
    seen: dict[str, ClaimResult] = {}

    def acting(kind: str) -> Any:
        def record(cid: int) -> None:
            seen[kind] = ledger.claim(cid, B)
            calls[kind].append(cid)

        return record

    keeper = LockKeeper(
        ledger,
        A,
        EXPIRY,
        JsonLogger(stream=out),
        on_expiring=acting("expiring"),
        on_overdue=acting("overdue"),
    )
    sent = time.monotonic()
    assert ledger.claim(2, A) is ClaimResult.ACQUIRED
    cancel = keeper.hold(2, sent)
    keeper.start()
    try:
        assert _wait(cancel.is_set)
        cancelled = time.monotonic()
        # Cancelled no sooner than expiry - margin (a lower bound: load only delays it), and
        # before the claim could lapse: another worker still found it held then.
        assert cancelled - sent >= EXPIRY * 0.75 - 0.05
        # The keeper cancels, then calls on_expiring: wait for the call (its claim is an RPC).
        assert _wait(lambda: calls["expiring"] == [2])
        assert seen["expiring"] is ClaimResult.HELD_BY_OTHER
        assert 2 in keeper.expiring and keeper.troubled(2)
        assert len(renewed) >= 2  # retried sooner after a failure
        # The chunk still runs: the pod is ended before the claim lapses.
        assert _wait(lambda: calls["overdue"] == [2])
        assert seen["overdue"] is ClaimResult.HELD_BY_OTHER  # not lapsed yet
    finally:
        keeper.stop()
    lost = [r for r in _records(out) if r.get("event") == CLAIM_LOST]
    assert lost and lost[0]["severity"] == "ERROR" and lost[0]["chunk_id"] == 2
    # each failed renewal is a warning naming the chunk, the error, the retry and the age
    failed = [r for r in _records(out) if r["severity"] == "WARNING"]
    assert failed and all(r["chunk_id"] == 2 for r in failed)
    assert failed[0]["message"] == (
        "lock renewal of chunk 2 failed: ConnectionError('Bigtable unreachable'); "
        f"retrying in {keeper.retry_every:g} s"
    )
    ages = [r["claim_age_s"] for r in failed]
    assert ages == sorted(ages) and 0 < ages[0] < EXPIRY  # counted from the claim


def test_a_chunk_that_returns_after_the_cancel_is_not_ended(bigtable_table, bigtable_client):
    class TimingOut(BigtableChunkLedger):
        def renew(self, chunk_id: int, token: int) -> bool:
            raise TimeoutError()

    ledger = _ledger(bigtable_table, bigtable_client, TimingOut)
    keeper, _, calls = _keeper(ledger)
    assert ledger.claim(3, A) is ClaimResult.ACQUIRED
    cancel = keeper.hold(3, time.monotonic())
    keeper.start()
    try:
        assert _wait(cancel.is_set)
        keeper.drop(3)  # the plugin noticed (check_cancelled) and returned
        time.sleep(EXPIRY / 2)
        assert calls["overdue"] == []
    finally:
        keeper.stop()


def test_a_claim_taken_by_another_is_lost_at_the_next_renewal(bigtable_table, bigtable_client):
    ledger = _ledger(bigtable_table, bigtable_client)
    keeper, out, calls = _keeper(ledger)
    assert ledger.claim(4, A) is ClaimResult.ACQUIRED
    cancel = keeper.hold(4, time.monotonic())
    # Another worker holds it now (as after a lapse while this process was frozen).
    ledger.client._table.mutate_row(ledger._key(4), [ledger.client._set_lock_mutation(LOCK, B)])
    keeper.start()
    try:
        assert _wait(cancel.is_set)
        assert 4 in keeper.lost and keeper.troubled(4) and calls["expiring"] == []
    finally:
        keeper.stop()
    assert any(r.get("event") == CLAIM_LOST for r in _records(out))
    assert not ledger.mark_done(4, A)


def test_stopped_keeper_threads_do_not_linger():
    keeper = LockKeeper(None, A, EXPIRY, JsonLogger(stream=io.StringIO()))  # type: ignore[arg-type]
    keeper.start()
    keeper.stop()
    time.sleep(0.3)
    assert not any(t.name.startswith("lock-") and t.is_alive() for t in threading.enumerate())
