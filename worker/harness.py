"""The worker harness: chunk window, per-chunk claims, plugin calls, exit codes.

The per-chunk work is a plugin named by import path (``PCG_WORKLOAD``,
``package.module:function``) and called as ``fn(ctx)`` with a :class:`ChunkContext`; the
harness owns everything else (DESIGN 4.2): the window from ``shared.grid.batch_coords``, one
claim per chunk in the ledger (done chunks skipped, a chunk held by another pod waited for up
to the lock expiry), lock renewal every ``lock_expiry / 3`` on a background thread, the done
marker on success, release on failure, and the exit code.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.api_core.exceptions import NotFound

from shared.adapters.bigtable.chunk_ledger import ChunkLedger, ClaimResult
from shared.grid import batch_coords
from shared.layers import chunk_id
from worker.env import WorkerEnv
from worker.errors import (
    EXIT_FATAL,
    EXIT_OK,
    EXIT_PREEMPTED,
    EXIT_TRANSIENT,
    FatalChunkError,
)
from worker.lock_keeper import LockKeeper
from worker.logs import JsonLogger
from worker.plugins import ChunkContext

__all__ = ["BatchRunner", "BatchStats"]


@dataclass
class BatchStats:
    chunks: int = 0
    processed: int = 0
    skipped: int = 0
    chunk_compute_s: float = 0.0
    started: float = field(default_factory=time.monotonic)


def _is_fatal(exc: BaseException) -> bool:
    # By name too: a plugin shipped in its own image may define its own FatalChunkError.
    return isinstance(exc, FatalChunkError) or type(exc).__name__ == "FatalChunkError"


class BatchRunner:
    """Runs the chunks of one batch through the plugin; :meth:`run` returns the exit code.

    ``stop`` is set on SIGTERM: no further chunk is started. :meth:`abort` (called by the
    signal thread when the current chunk outlives the grace period) releases the held claims
    and settles the exit code at 143; the caller then leaves with ``os._exit``.
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
    ) -> None:
        self.env, self.client, self.fn, self.log, self.token = env, client, fn, log, token
        self.ledger = ChunkLedger(client, env.stage)
        self.stop = stop if stop is not None else threading.Event()
        self.clock = clock
        self.stats = BatchStats()
        self.summary_fields = summary_fields if summary_fields is not None else {}
        self.keeper = LockKeeper(self.ledger, token, env.lock_expiry_s / 3, log)
        self._state = threading.Lock()  # done-marking vs abort vs the final exit code
        self._final: int | None = None

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
            code = self._chunk(coord)  # type: ignore[arg-type]
            if code is not None:
                return code
        return EXIT_OK

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

    def _summary(self, code: int) -> None:
        s = self.stats
        self.log.info(
            f"batch summary: {s.processed} processed, {s.skipped} skipped of {s.chunks}",
            chunks=s.chunks,
            processed=s.processed,
            skipped=s.skipped,
            chunk_compute_s=round(s.chunk_compute_s, 6),
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

    def _chunk(self, coord: tuple[int, int, int]) -> int | None:
        """Claim, run and mark one chunk; an exit code ends the batch, None continues."""
        env = self.env
        cid = chunk_id(env.layer, coord, env.n_layers, env.spatial_bits)
        name = f"{env.layer}_{coord}"
        clog = self.log.bind(chunk=name, coord=list(coord), chunk_id=cid)
        try:
            claim = self._claim(cid, name, clog)
        except Exception as exc:  # noqa: BLE001
            return self._fail(exc, clog, f"chunk {name}")
        if claim is None:
            return EXIT_PREEMPTED if self.stop.is_set() else EXIT_TRANSIENT
        if claim is ClaimResult.ALREADY_DONE:
            self.stats.skipped += 1
            clog.debug(f"chunk {name} already done: skipped")
            return None
        self.keeper.hold(cid)
        ctx = ChunkContext(
            graph_id=env.graph_id,
            stage=env.stage,
            layer=env.layer,
            coord=coord,
            chunk_id=cid,
            n_layers=env.n_layers,
            dataset=env.dataset,
            client=self.client,
            logger=clog,
            run_id=env.run_id,
        )
        t0 = time.perf_counter()
        try:
            self.fn(ctx)
        except BaseException as exc:  # noqa: BLE001 - classified below (SystemExit: transient)
            self.stats.chunk_compute_s += time.perf_counter() - t0
            self._release(cid, clog)
            return self._fail(exc, clog, f"chunk {name}")
        spent = time.perf_counter() - t0
        self.stats.chunk_compute_s += spent
        with self._state:
            if self._final is not None:  # aborted meanwhile: the claim is already released
                return self._final
            self.keeper.drop(cid)  # before marking: a renewal racing the unlock is no loss
            try:
                self.ledger.mark_done(cid, self.token)
            except Exception as exc:  # noqa: BLE001
                self._release(cid, clog)
                return self._fail(exc, clog, f"chunk {name}")
        if cid in self.keeper.lost:
            clog.error(f"chunk {name} finished after its claim lapsed: it may be built twice")
        clog.debug(f"chunk {name} done", compute_s=round(spent, 6))
        self.stats.processed += 1
        return None

    def _claim(self, cid: int, name: str, clog: JsonLogger) -> ClaimResult | None:
        """Claim ``cid``, waiting (with backoff) while another worker holds it, up to the
        lock expiry: its claim lapses by then unless it is alive and renewing. None: gave up
        (or SIGTERM)."""
        expiry = self.env.lock_expiry_s
        deadline = self.clock() + expiry * 1.05 + 1.0
        delay, waited = 0.2, False
        while True:
            result = self.ledger.claim(cid, self.token)
            if result is not ClaimResult.HELD_BY_OTHER:
                if waited:
                    clog.info(f"chunk {name} claimed after waiting for another worker")
                return result
            if not waited:
                clog.info(f"chunk {name} is held by another worker; waiting up to {expiry:g} s")
                waited = True
            left = deadline - self.clock()
            if left <= 0:
                clog.error(
                    f"chunk {name} is still held by another worker after the lock expiry "
                    f"({expiry:g} s); exiting for a retry",
                    exit_code=EXIT_TRANSIENT,
                )
                return None
            if self.stop.wait(min(delay, left)):
                return None
            delay = min(delay * 2, 5.0)

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
        if isinstance(exc, NotFound):
            clog.error(
                f"Bigtable table {self.env.graph_id!r} or instance not found ({exc}): create "
                "the graph table first",
                traceback=tb,
                exit_code=EXIT_FATAL,
            )
            return EXIT_FATAL
        clog.error(
            f"{what} failed: {exc!r} (transient: exit 1, the index is retried)",
            error=repr(exc),
            traceback=tb,
            exit_code=EXIT_TRANSIENT,
        )
        return EXIT_TRANSIENT
