"""Crash safety and fast recovery of `python -m worker` against the Bigtable emulator.

A worker is SIGKILLed at a named point of a chunk (``PCG_TEST_PAUSE_AT``: it logs
``paused at <point>`` and sleeps there), the same Job index is started again at once (as
Kubernetes does with ``podReplacementPolicy: Failed``), the rest of the demo is built, and
the oracle must agree: no orphan node, no parentless node, every chunk once.
"""

from __future__ import annotations

import signal
import time

import pytest

from adapters.bigtable.chunk_ledger import BigtableChunkLedger
from tests.builders.worker_runs import (
    N_LAYERS,
    _env,
    _finish,
    _first_chunk,
    _oracle,
    _parse,
    _run,
    _run_layer,
    _start,
    _wait_for,
)

# A retry takes over the dead attempt's claim once it went unrenewed for the takeover window
# (10 s of this 12 s expiry: renewals every 4 s, docs/zombies.md); one that waited out the
# expiry would find it lapsed and acquire it instead of taking it over.
EXPIRY = "12"


def _kill_at(table_id: str, demo, layer: int, point: str) -> list[dict]:  # noqa: F811
    """Start batch 0 of ``layer`` paused at ``point``, SIGKILL it there; its log lines."""
    proc = _start(_env(table_id, demo, layer, 0, PCG_TEST_PAUSE_AT=point, PCG_LOCK_EXPIRY_S=EXPIRY))
    head = _wait_for(proc, f"paused at {point}", timeout=60)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    return _parse("".join(head))


@pytest.mark.parametrize(
    "layer, point",
    [
        (2, "after_claim"),
        (2, "ingest_after_note"),
        (2, "ingest_mid_write"),
        (2, "before_done"),
        (3, "ingest_mid_write"),
    ],
)
def test_sigkill_mid_chunk_then_retry_recovers_and_oracle_agrees(
    bigtable_table,
    demo,  # noqa: F811
    layer,
    point,
):
    client, table_id = bigtable_table
    for below in range(2, layer):
        _run_layer(table_id, demo, below)
    _kill_at(table_id, demo, layer, point)
    cid = _first_chunk()[1] if layer == 2 else None
    t0 = time.monotonic()
    retry = _finish(
        _start(_env(table_id, demo, layer, 0, PCG_LOCK_EXPIRY_S=EXPIRY)), t0, timeout=120
    )
    assert retry.code == 0, (retry.messages(), retry.stderr[-2000:])
    text = retry.messages()
    # Fast recovery: the dead attempt's claim is taken over once unrenewed for the window,
    # never waited out (a retry that started later than the expiry on a loaded machine
    # finds it lapsed and acquires it without waiting).
    took_over = "took over the claim of an earlier attempt" in text
    assert took_over or "held by another worker" not in text
    assert "leaving it for a retry" not in text
    # Crash safety: the retry knows it recovers, and ingest deletes what the dead one wrote.
    assert "did not finish" in text and retry.summary()["recovered"] == 1
    if point in ("ingest_mid_write", "before_done"):
        cleanup = next(x for x in retry.lines if "deleted" in x["message"])
        assert cleanup["deleted_node_ids"] > 0
    if cid is not None:
        assert BigtableChunkLedger(client).is_done(cid)
    for rest in range(layer, N_LAYERS + 1):
        _run_layer(table_id, demo, rest)
    result = _oracle(client, demo)
    assert result.ok, result.mismatches
    assert result.parentless == 0


def test_without_takeover_the_retry_waits_out_the_dead_claim(bigtable_table, demo):  # noqa: F811
    """The knob off (``PCG_CLAIM_TAKEOVER=0``): the same kill costs a lock expiry."""
    _, table_id = bigtable_table
    _kill_at(table_id, demo, 2, "after_begin")
    expiry = 20  # must outlast the retry's start-up (up to 10 s on a loaded machine)
    run = _run(
        _env(
            table_id,
            demo,
            2,
            0,
            PCG_CLAIM_TAKEOVER="0",
            PCG_LOCK_EXPIRY_S=str(expiry),
            PCG_BATCH_SIZE="1",
        ),
        timeout=120,
    )
    assert "held by another worker" in run.messages()
    assert run.code == 0 and run.summary()["recovered"] == 1
