"""The harness's claim of one chunk (``BatchRunner._claim``) in-process, on the Bigtable
emulator: a free chunk at once; a dead attempt of this Job index taken over once its claim
went unrenewed for the takeover window, polled often enough to take it before it lapses; a
chunk held by another index waited for until it lapses; the wait given up after the first
held chunk, or on SIGTERM (docs/zombies.md). In-process so the mutation runner's mutants are
the code under test (docs/testing-mutation.md)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from google.cloud.bigtable.data.mutations import SetCell

from adapters.bigtable.chunk_ledger import LOCK, ClaimResult
from adapters.bigtable.chunk_ledger import BigtableChunkLedger as ChunkLedger
from worker.claim_tokens import attempt_token, lineage, lineage_range
from worker.harness import BatchRunner
from worker.logs import JsonLogger

EXPIRY_S = 3.0  # renewals every 1 s, takeover window 2.5 s, polls at most every 0.25 s
OWN = lineage("g", "ingest", 2, "r1", 3)
DEAD, ME = attempt_token(OWN, 1), attempt_token(OWN, 2)
OTHER = attempt_token(lineage("g", "ingest", 2, "r1", 4), 1)


def _runner(
    client: Any, out: io.StringIO, clock: Callable[[], float] = time.monotonic
) -> BatchRunner:
    env = SimpleNamespace(stage="ingest", lock_expiry_s=EXPIRY_S, index=3, term_grace_s=5.0)
    return BatchRunner(
        env,  # type: ignore[arg-type]  # only what _claim reads
        client,
        lambda ctx: None,
        JsonLogger(stream=out),
        token=ME,
        lineage=lineage_range(OWN),
        hard_exit=lambda code: None,
        clock=clock,
    )


def _messages(out: io.StringIO) -> list[str]:
    return [json.loads(line)["message"] for line in out.getvalue().splitlines() if line]


def _claimed_ago(ledger: ChunkLedger, cid: int, token: int, age_s: float) -> None:
    when = datetime.now(UTC) - timedelta(seconds=age_s)
    micros = int(when.timestamp() * 1e6) // 1000 * 1000
    cell = SetCell(LOCK.family_id, LOCK.key, LOCK.serialize(token), timestamp_micros=micros)
    ledger.client._table.mutate_row(ledger._key(cid), [cell])


@pytest.fixture
def client(bigtable_table, bigtable_client) -> Any:
    _, table_id = bigtable_table
    return bigtable_client(table_id, lock_expiry=timedelta(seconds=EXPIRY_S))


def test_a_free_chunk_is_claimed_at_once(client):
    out = io.StringIO()
    runner = _runner(client, out)
    before = runner.clock()
    result, sent = runner._claim(1, "2_(0, 0, 0)", runner.log)
    assert result is ClaimResult.ACQUIRED and before <= sent <= runner.clock()
    assert _messages(out) == []
    assert runner.ledger.holder(1).token == ME


def test_a_dead_attempt_of_this_index_is_taken_over_after_the_window(client):
    out = io.StringIO()
    runner = _runner(client, out)
    _claimed_ago(runner.ledger, 2, DEAD, 1.5)  # its last renewal 1.5 s ago: 1 s to go
    result, sent = runner._claim(2, "2_(0, 0, 1)", runner.log)
    assert result is ClaimResult.TAKEN_OVER  # not ACQUIRED: taken before it lapsed
    assert runner.ledger.holder(2).token == ME
    messages = _messages(out)
    assert messages[0] == "chunk 2_(0, 0, 1) is held by another worker; waiting up to 4.15 s"
    assert messages[-1] == "chunk 2_(0, 0, 1) claimed after waiting for another worker"
    assert not runner._waited_out


def test_another_index_is_waited_for_until_its_claim_lapses(client):
    out = io.StringIO()
    runner = _runner(client, out)
    _claimed_ago(runner.ledger, 3, OTHER, 1.0)  # a live claim of another index: 2 s left
    result, _ = runner._claim(3, "2_(0, 1, 0)", runner.log)
    assert result is ClaimResult.ACQUIRED  # it lapsed; never taken over
    assert runner.ledger.holder(3).token == ME
    assert _messages(out)[-1] == "chunk 2_(0, 1, 0) claimed after waiting for another worker"


def test_after_one_chunk_waited_out_later_held_chunks_are_not_waited_for(client):
    out = io.StringIO()
    runner = _runner(client, out, clock=lambda: 100.0)  # frozen: no time left, and none passes
    runner.ledger.claim(4, OTHER)  # live, another index
    runner._waited_out = True
    result, sent = runner._claim(4, "2_(1, 0, 0)", runner.log)
    assert result is None and runner._waited_out and sent == 100.0
    messages = _messages(out)
    assert messages[0] == "chunk 2_(1, 0, 0) is held by another worker; waiting up to 0 s"
    assert messages[1] == (
        "chunk 2_(1, 0, 0) is still held by another worker after the lock expiry (3 s); "
        "leaving it for a retry (transient)"
    )
    gave_up = json.loads(out.getvalue().splitlines()[1])
    assert gave_up["severity"] == "ERROR" and gave_up["exit_code"] == 1
    assert runner.ledger.holder(4).token == OTHER


def test_sigterm_ends_the_wait(client):
    out = io.StringIO()
    runner = _runner(client, out)
    runner.ledger.claim(5, OTHER)
    runner.stop.set()
    result, _ = runner._claim(5, "2_(1, 1, 0)", runner.log)
    assert result is None and not runner._waited_out
    assert runner.ledger.holder(5).token == OTHER


def test_a_chunk_done_meanwhile_is_reported_done(client):
    out = io.StringIO()
    runner = _runner(client, out)
    runner.ledger.claim(6, OTHER)
    runner.ledger.mark_done(6, OTHER)
    result, _ = runner._claim(6, "2_(1, 1, 1)", runner.log)
    assert result is ClaimResult.ALREADY_DONE and _messages(out) == []


def test_a_long_wait_keeps_logging_so_the_worker_never_looks_hung(client, monkeypatch):
    """The controller reads a worker's newest log line as progress (docs/hung-workers.md): a
    wait on a held chunk says so every WAITING_LOG_EVERY_S, or a replacement waiting out a
    dead attempt's claim would be deleted as hung."""
    import worker.harness as harness

    out = io.StringIO()
    ticks = iter(range(0, 10_000, 4))  # each look at the clock: 4 s later
    runner = _runner(client, out, clock=lambda: float(next(ticks)))
    monkeypatch.setattr(harness, "WAITING_LOG_EVERY_S", 7.0)
    runner.ledger.claim(5, OTHER)  # live, another index, never renewed here
    result, _ = runner._claim(5, "2_(1, 1, 0)", runner.log)
    assert result is None  # given up: the clock ran past the expiry
    still = [m for m in _messages(out) if m.startswith("chunk 2_(1, 1, 0) still held")]
    assert still, _messages(out)
