"""Small per-chunk plugins for the worker contract tests.

Named as ``PCG_WORKLOAD=tests.builders.plugins:<function>``."""

from __future__ import annotations

import os
import time
from typing import Any

from worker.errors import FatalChunkError


def ok(ctx: Any) -> None:
    """Does nothing: the chunk succeeds at once."""


def fatal(ctx: Any) -> None:
    raise FatalChunkError(f"bad input in chunk {ctx.layer}_{tuple(ctx.coord)}")


def boom(ctx: Any) -> None:
    raise RuntimeError("transient boom")


def slow(ctx: Any) -> None:
    """Logs that it started, then sleeps ``TEST_PLUGIN_SLEEP_S`` seconds (default 60)."""
    ctx.logger.info("slow chunk started")
    time.sleep(float(os.environ.get("TEST_PLUGIN_SLEEP_S", "60")))


def fatal_at_origin(ctx: Any) -> None:
    """Fatal at chunk (0, 0, 0) of layer 2 while the file ``TEST_FAIL_MARKER`` exists: a bad
    input the operator then fixes before re-submitting the layer."""
    marker = os.environ.get("TEST_FAIL_MARKER", "")
    if ctx.layer == 2 and tuple(ctx.coord) == (0, 0, 0) and marker and os.path.exists(marker):
        raise FatalChunkError("chunk (0, 0, 0) has a corrupt watershed block")


def nap(ctx: Any) -> None:
    """Sleeps ``TEST_PLUGIN_SLEEP_S`` seconds (default 0.3): a chunk that takes a while."""
    time.sleep(float(os.environ.get("TEST_PLUGIN_SLEEP_S", "0.3")))


def mixed(ctx: Any) -> None:
    """Fatal at ``TEST_FATAL_COORD``, transient at ``TEST_BOOM_COORD`` ("x,y,z"), else fine."""
    here = ",".join(map(str, ctx.coord))
    if here == os.environ.get("TEST_FATAL_COORD"):
        raise FatalChunkError(f"bad input in chunk {ctx.layer}_{tuple(ctx.coord)}")
    if here == os.environ.get("TEST_BOOM_COORD"):
        raise RuntimeError("transient boom")


def _renewals_fail() -> None:
    """From now on every lock renewal of this process raises (Bigtable unreachable)."""
    from worker.fault_points import RENEWALS

    RENEWALS.cut("Bigtable unreachable (test)")


def stuck_unrenewable(ctx: Any) -> None:
    """Renewals fail, and the chunk cannot be interrupted: sleeps ``TEST_PLUGIN_SLEEP_S``
    seconds (default 60)."""
    _renewals_fail()
    ctx.logger.info("slow chunk started")
    time.sleep(float(os.environ.get("TEST_PLUGIN_SLEEP_S", "60")))


def cooperative_unrenewable(ctx: Any) -> None:
    """Renewals fail; the chunk checks for cancellation between steps (every 0.1 s, for
    ``TEST_PLUGIN_SLEEP_S`` seconds, default 60)."""
    _renewals_fail()
    ctx.logger.info("slow chunk started")
    for _ in range(int(float(os.environ.get("TEST_PLUGIN_SLEEP_S", "60")) * 10)):
        ctx.check_cancelled()
        time.sleep(0.1)


def claim_stolen(ctx: Any) -> None:
    """At ``TEST_STEAL_COORD`` ("x,y,z") a contender's token overwrites the claim just before
    the plugin returns (as a replacement pod would after a lapse), so the harness's fenced done
    marker is refused; every other chunk succeeds."""
    if ",".join(map(str, ctx.coord)) != os.environ.get("TEST_STEAL_COORD"):
        return
    from adapters.bigtable.chunk_ledger import LOCK, chunk_row_key

    contender = ctx.client._set_lock_mutation(LOCK, 0x5EC0_1D)
    ctx.client._table.mutate_row(chunk_row_key(ctx.chunk_id, ctx.stage), contender)


def hang_once(ctx: Any) -> None:
    """Index 0's first attempt (while the file ``TEST_HANG_MARK`` does not exist) blocks
    forever at its fourth chunk: alive, its claim renewed by the harness, no progress (a
    deadlock or a read that never returns). Every other chunk succeeds at once."""
    global _hang_calls
    _hang_calls += 1
    mark = os.environ.get("TEST_HANG_MARK", "")
    first = mark and not os.path.exists(mark)
    if first and os.environ.get("JOB_COMPLETION_INDEX") == "0" and _hang_calls == 4:
        open(mark, "w").close()
        ctx.logger.info("reading the watershed block")
        while True:
            time.sleep(1)


_hang_calls = 0
