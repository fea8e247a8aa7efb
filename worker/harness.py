"""The worker harness: chunk window, per-chunk claims, plugin calls, exit codes.

The per-chunk work is a plugin named by import path (``PCG_WORKLOAD``,
``package.module:function``) and called as ``fn(ctx)`` with a :class:`ChunkContext`; the
harness owns everything else (docs/job-and-worker-contract.md#the-worker):

- the window from ``shared.model.grid.batch_coords``, worked to its end: a failed chunk is logged
  and the next one started; the pod then exits 1 if any chunk was transient, else 42 if any
  was fatal, else 0 (as the predecessor's harness);
- one claim per chunk in the ledger: done chunks skipped; a chunk held by another pod waited
  for up to the lock expiry (once per window: later held chunks are left for a retry); a
  claim of an earlier attempt of this Job index taken over once it went unrenewed for the
  takeover window (``worker.claim_tokens``, docs/zombies.md), never while it is renewed;
- crash safety: before the plugin runs, the chunk's prior unfinished attempt is read and this
  attempt recorded (``chunk_started``); the plugin learns of the prior one through
  ``ctx.recovering``/``previous_token``/``note`` and cleans up after it;
- the claim kept alive by ``worker.lock_keeper``: a claim lost or not renewed within the
  margin is logged as ``claim_lost`` (ERROR), never marked done, and counted transient; an
  expiring claim also ends the pod (exit 1), through ``os._exit`` if the plugin does not
  return in time;
- the done marker written fenced (one conditional mutation while the claim is ours), release
  on failure.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.bigtable.chunk_ledger import BigtableChunkLedger
from shared.model.claim_timing import claim_poll_cap_s
from shared.model.grid import batch_coords
from shared.model.layers import chunk_id
from shared.ports.chunk_ledger import ChunkLedger, ClaimResult
from worker import chaos_points
from worker.chunk_attempt import begin_attempt
from worker.env import WorkerEnv
from worker.errors import (
    EXIT_FATAL,
    EXIT_OK,
    EXIT_PREEMPTED,
    EXIT_TRANSIENT,
    FatalChunkError,
)
from worker.fault_points import GatedLedger, pause_point
from worker.lock_keeper import CLAIM_LOST, LockKeeper
from worker.logs import JsonLogger
from worker.plugins import ChunkContext

__all__ = ["BatchRunner", "BatchStats"]

# While waiting on a chunk another worker holds, a line this often: the wait (up to the lock
# expiry) must not look like a hung worker (docs/hung-workers.md), whose floor may be 20 s.
WAITING_LOG_EVERY_S = 10.0


@dataclass
class BatchStats:
    chunks: int = 0
    processed: int = 0
    skipped: int = 0
    transient: int = 0
    fatal: int = 0
    recovered: int = 0
    chunk_compute_s: float = 0.0
    # The first processed chunk's compute, apart: it carries what a process pays once (lazy
    # imports, a first read), which the canary's forecast separates from a chunk's time.
    first_chunk_s: float | None = None
    # Each processed chunk's whole span (claim, begin, compute, done marker), summed, and the
    # first one's: what a chunk costs a running pod, ledger round trips included (they are
    # as long as the compute on a busy Bigtable), for the canary's per-chunk time.
    chunk_span_s: float = 0.0
    first_span_s: float | None = None
    started: float = field(default_factory=time.monotonic)


def _is_fatal(exc: BaseException) -> bool:
    # By name too: a plugin shipped in its own image may define its own FatalChunkError.
    return isinstance(exc, FatalChunkError) or type(exc).__name__ == "FatalChunkError"


def _leave(log: JsonLogger, code: int) -> None:
    log.flush()
    os._exit(code)


class BatchRunner:
    """Runs the chunks of one batch through the plugin; :meth:`run` returns the exit code.

    ``stop`` is set on SIGTERM: no further chunk is started. :meth:`abort` (called by the
    signal thread when the current chunk outlives the grace period) releases the held claims
    and settles the exit code at 143; the caller then leaves with ``os._exit``.
    ``lineage``: the inclusive token range of this Job index's attempts, whose live claims
    are taken over (None: never). ``hard_exit(code)`` leaves the process at once (default
    ``os._exit`` after flushing the log); the lock keeper calls it through :meth:`_overdue`.
    """

    def __init__(
        self,
        env: WorkerEnv,
        client: Any,
        fn: Callable[[ChunkContext], Any],
        log: JsonLogger,
        token: int,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        summary_fields: dict[str, Any] | None = None,
        lineage: tuple[int, int] | None = None,
        hard_exit: Callable[[int], None] | None = None,
    ) -> None:
        self.env, self.fn, self.log, self.token = env, fn, log, token
        self.client = chaos_points.client_for(client)  # the plugin's (chaos: its faults)
        self.lineage = lineage
        # Renewals pass the renewal cut (worker.fault_points): Bigtable cut off in tests/chaos.
        self.ledger: ChunkLedger = GatedLedger(BigtableChunkLedger(client, env.stage))
        self.stop = stop if stop is not None else threading.Event()
        self.clock = clock
        self.stats = BatchStats()
        self.summary_fields = summary_fields if summary_fields is not None else {}
        self.hard_exit = hard_exit if hard_exit is not None else (lambda c: _leave(log, c))
        self.keeper = LockKeeper(
            self.ledger, token, env.lock_expiry_s, log, on_overdue=self._overdue, clock=clock
        )
        self._state = threading.Lock()  # done-marking vs abort vs the final exit code
        self._final: int | None = None
        self._waited_out = False  # a held chunk was waited for in vain: wait no more

    # ------------------------------------------------------------------ whole batch

    def run(self) -> int:
        try:
            code = self._run()
        except Exception as exc:  # noqa: BLE001 - e.g. the ledger unreachable
            code = self._fail(exc, self.log, f"batch {self.env.index}")
        finally:
            self.keeper.stop()
        return self.finish(code)

    def _run(self) -> int:
        env = self.env
        coords = batch_coords(env.index, env.grid_shape, env.seed, env.layer_batch_size)
        self.stats.chunks = len(coords)
        self.log.info(
            f"layer {env.layer} batch {env.index}: {len(coords)} chunks",
            chunks=len(coords),
            batch_size=env.layer_batch_size,
            grid=list(env.grid_shape),
            workload=env.workload,
        )
        self.keeper.start()
        window = [tuple(int(v) for v in row) for row in coords]
        ids = [chunk_id(env.layer, c, env.n_layers, env.spatial_bits) for c in window]
        done = self.ledger.done_among(ids)  # one read: a re-run skips its done chunks cheaply
        self.stats.skipped += sum(cid in done for cid in ids)
        for coord, cid in zip(window, ids, strict=True):
            if cid in done:
                continue
            if self.stop.is_set():
                return self._preempted()
            processed, t0 = self.stats.processed, time.perf_counter()
            code = self._chunk(coord)  # type: ignore[arg-type]
            if self.stats.processed > processed:
                self._timed_span(time.perf_counter() - t0)
            if code is not None:
                return code
        if self.stats.transient:
            return EXIT_TRANSIENT
        return EXIT_FATAL if self.stats.fatal else EXIT_OK

    def _timed_span(self, spent: float) -> None:
        self.stats.chunk_span_s += spent
        if self.stats.first_span_s is None:
            self.stats.first_span_s = spent

    def finish(self, code: int) -> int:
        """Settle the exit code once (releasing any claim still held) and log the summary."""
        with self._state:
            if self._final is None:
                self.keeper.release_all()
                self._final = code
                self._summary(code)
            return self._final

    def abort(self) -> int:
        """SIGTERM grace expired while a chunk still runs: abandon it (its claim released,
        no done marker) and settle on 143."""
        with self._state:
            if self._final is None:
                held = self.keeper.held()
                self.keeper.release_all()
                self.log.warning(
                    "SIGTERM: the running chunk did not finish within the grace period; "
                    "abandoned it and released its claim",
                    released=held,
                    grace_s=self.env.term_grace_s,
                )
                self._final = EXIT_PREEMPTED
                self._summary(EXIT_PREEMPTED)
            return self._final

    def _overdue(self, cid: int) -> None:
        """The lock keeper cancelled ``cid``'s claim and the plugin is still running: leave
        now (exit 1), before the claim can lapse and another worker take the chunk."""
        got = self._state.acquire(timeout=2.0)  # never wait on a stuck main thread
        try:
            if self._final is None:
                self.log.error(
                    f"chunk {cid} is still running after its claim was cancelled: leaving "
                    "now (exit 1) so no other worker computes it alongside",
                    event=CLAIM_LOST,
                    chunk_id=cid,
                    exit_code=EXIT_TRANSIENT,
                )
                self._final = EXIT_TRANSIENT
                self.stats.transient += 1
                self._summary(EXIT_TRANSIENT)
        finally:
            if got:
                self._state.release()
        self.hard_exit(EXIT_TRANSIENT)

    def _summary(self, code: int) -> None:
        s = self.stats
        self.log.info(
            f"batch summary: {s.processed} processed, {s.skipped} skipped of {s.chunks}",
            chunks=s.chunks,
            processed=s.processed,
            skipped=s.skipped,
            transient=s.transient,
            fatal=s.fatal,
            recovered=s.recovered,
            chunk_compute_s=round(s.chunk_compute_s, 6),
            first_chunk_s=None if s.first_chunk_s is None else round(s.first_chunk_s, 6),
            chunk_span_s=round(s.chunk_span_s, 6),
            first_span_s=None if s.first_span_s is None else round(s.first_span_s, 6),
            elapsed_s=round(time.monotonic() - s.started, 6),
            exit_code=code,
            **self.summary_fields,
        )

    def _preempted(self) -> int:
        held = self.keeper.held()
        self.keeper.release_all()
        self.log.warning("SIGTERM: stopping before the next chunk", released=held)
        return EXIT_PREEMPTED

    # ------------------------------------------------------------------ one chunk

    def _count(self, code: int) -> None:
        if code == EXIT_FATAL:
            self.stats.fatal += 1
        else:
            self.stats.transient += 1

    def _chunk(self, coord: tuple[int, int, int]) -> int | None:
        """Claim, run and mark one chunk. A failure is counted and None returned (the window
        goes on); an exit code ends the batch now (SIGTERM, an expiring claim, a missing
        table)."""
        env = self.env
        cid = chunk_id(env.layer, coord, env.n_layers, env.spatial_bits)
        name = f"{env.layer}_{coord}"
        clog = self.log.bind(chunk=name, coord=list(coord), chunk_id=cid)
        try:
            claim, sent = self._claim(cid, name, clog)
        except Exception as exc:  # noqa: BLE001
            return self._failed(exc, clog, name)
        if claim is None:
            if self.stop.is_set():
                return EXIT_PREEMPTED
            self.stats.transient += 1
            return None
        if claim is ClaimResult.ALREADY_DONE:
            self.stats.skipped += 1
            clog.debug(f"chunk {name} already done: skipped")
            return None
        cancel = self.keeper.hold(cid, sent)
        if claim is ClaimResult.TAKEN_OVER:
            clog.info(f"chunk {name}: took over the claim of an earlier attempt of this index")
        try:
            ctx = self._begin(cid, coord, clog, cancel)
        except Exception as exc:  # noqa: BLE001
            self._release(cid, clog)
            return self._failed(exc, clog, name)
        t0 = time.perf_counter()
        try:
            chaos_points.before_plugin(ctx, self.ledger, clog)
            self.fn(ctx)
            chaos_points.after_plugin(ctx)
            pause_point("before_done", clog)
        except BaseException as exc:  # noqa: BLE001 - classified below (SystemExit: transient)
            self.stats.chunk_compute_s += time.perf_counter() - t0
            self._release(cid, clog)
            if cid in self.keeper.expiring:
                return self._expired(clog, name)
            return self._failed(exc, clog, name)
        spent = time.perf_counter() - t0
        self.stats.chunk_compute_s += spent
        if self.stats.first_chunk_s is None:
            self.stats.first_chunk_s = spent
        with self._state:
            if self._final is not None:  # aborted meanwhile: the claim is already released
                return self._final
            if self.keeper.troubled(cid):
                self.keeper.drop(cid)
                if cid in self.keeper.expiring:
                    return self._expired(clog, name)
                self.stats.transient += 1
                return None  # claim_lost is logged already; never a silent done
            self.keeper.drop(cid)  # before marking: a renewal racing the unlock is no loss
            try:
                marked = self.ledger.mark_done(cid, self.token)
            except Exception as exc:  # noqa: BLE001
                self._release(cid, clog)
                return self._failed(exc, clog, name)
        if not marked:
            clog.error(
                f"{CLAIM_LOST}: chunk {name} finished but its claim was no longer ours: not "
                "marked done (transient: it is built again)",
                event=CLAIM_LOST,
                exit_code=EXIT_TRANSIENT,
            )
            self.stats.transient += 1
            return None
        chaos_points.after_done(ctx)
        clog.debug(f"chunk {name} done", compute_s=round(spent, 6))
        self.stats.processed += 1
        return None

    def _begin(
        self, cid: int, coord: tuple[int, int, int], clog: JsonLogger, cancel: threading.Event
    ) -> ChunkContext:
        ctx = begin_attempt(self.ledger, self.env, self.client, self.token, cid, coord, clog)
        ctx.cancelled = cancel
        self.stats.recovered += int(ctx.recovering)
        return ctx

    def _expired(self, clog: JsonLogger, name: str) -> int:
        """The chunk's claim could not be renewed in time: end the attempt and the pod."""
        self.stats.transient += 1
        clog.error(
            f"chunk {name}: its claim could not be renewed within the safety margin; ending "
            "the pod (exit 1) before it can lapse",
            event=CLAIM_LOST,
            exit_code=EXIT_TRANSIENT,
        )
        return EXIT_TRANSIENT

    def _failed(self, exc: BaseException, clog: JsonLogger, name: str) -> int | None:
        """Log and count a failed chunk; the batch goes on, unless the table is missing."""
        code = self._fail(exc, clog, f"chunk {name}")
        self._count(code)
        return code if self.ledger.table_missing(exc) else None

    def _claim(self, cid: int, name: str, clog: JsonLogger) -> tuple[ClaimResult | None, float]:
        """Claim ``cid``, waiting (with backoff) while another worker holds it, up to the
        lock expiry: its claim lapses by then unless it is alive and renewing. Returns the
        result (None: gave up, or SIGTERM) and when its successful request was sent."""
        expiry = self.env.lock_expiry_s
        patience = 0.0 if self._waited_out else expiry * 1.05 + 1.0
        deadline = self.clock() + patience
        # Polled often enough to meet a dead attempt's claim between the takeover window and
        # its expiry (docs/zombies.md).
        delay, waited, cap = 0.2, False, claim_poll_cap_s(expiry)
        said_at = self.clock()
        while True:
            sent = self.clock()
            result = chaos_points.claim(self.ledger, cid, self.token, self.lineage, clog)
            if result is not ClaimResult.HELD_BY_OTHER:
                if waited:
                    clog.info(f"chunk {name} claimed after waiting for another worker")
                return result, sent
            if not waited:
                clog.info(f"chunk {name} is held by another worker; waiting up to {patience:g} s")
                waited = True
            left = deadline - self.clock()
            if self.clock() - said_at >= WAITING_LOG_EVERY_S:
                # A worker waiting on a held claim is not hung: the controller reads its log
                # lines as progress (docs/hung-workers.md), and the wait may outlast the floor.
                said_at = self.clock()
                clog.info(f"chunk {name} still held by another worker; {max(left, 0):.0f} s left")
            if left <= 0:
                self._waited_out = True
                clog.error(
                    f"chunk {name} is still held by another worker after the lock expiry "
                    f"({expiry:g} s); leaving it for a retry (transient)",
                    exit_code=EXIT_TRANSIENT,
                )
                return None, sent
            if self.stop.wait(min(delay, left)):
                return None, sent
            delay = min(delay * 2, cap)

    def _release(self, cid: int, clog: JsonLogger) -> None:
        self.keeper.drop(cid)
        try:
            self.ledger.release(cid, self.token)
        except Exception as exc:  # noqa: BLE001 - the claim lapses by itself
            clog.warning(f"could not release the claim on chunk {cid}: {exc!r}")

    def _fail(self, exc: BaseException, clog: JsonLogger, what: str) -> int:
        """Log a failure of ``what`` ("chunk 3_(46, 5, 29)", "batch 40") with its traceback
        and classify it: the exit code."""
        tb = "".join(traceback.format_exception(exc))
        if _is_fatal(exc):
            clog.error(f"fatal {what}: {exc}", error=repr(exc), traceback=tb, exit_code=42)
            return EXIT_FATAL
        table = self.ledger.missing_table(exc)
        if table is not None:
            message = missing_table_message(self.env, table, exc)
            clog.error(message, traceback=tb, exit_code=EXIT_FATAL)
            return EXIT_FATAL
        clog.error(
            f"{what} failed: {exc!r} (transient: exit 1, the index is retried)",
            error=repr(exc),
            traceback=tb,
            exit_code=EXIT_TRANSIENT,
        )
        return EXIT_TRANSIENT


def missing_table_message(env: WorkerEnv, table: str, exc: BaseException) -> str:
    """What a chunk that found no table says: which table (the graph's, or one the stage's
    plugin writes), where, and how it is made."""
    where = f"{env.project}/{env.instance}"
    what = (
        f"Bigtable table {table!r}" if table else f"the Bigtable instance of table {env.graph_id!r}"
    )
    return (
        f"{what} not found in {where} ({exc}): create it before the {env.stage} stage runs "
        "(`pipeline setup -c pipeline.yml` makes the tables each configured stage writes; "
        "docs/setup-passes.md)"
    )
