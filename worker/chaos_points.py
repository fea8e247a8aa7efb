"""Chaos fault points of a chunk attempt (`pipeline demo --chaos`), unset in production.

With ``PCG_CHAOS_DIR`` set (the demo's chaos mailbox, ``shared.adapters.local.chaos_mailbox``)
the harness calls :func:`before_plugin` once the attempt is recorded, :func:`after_plugin`
when the plugin returned, and :func:`after_done` once the done marker is written. Each
appends an audit record (what `chunks_processed_twice_where_unsafe` is counted from), and
:func:`before_plugin` takes the oldest armed fault, if any, and plays it on this chunk:

- ``chunk_transient`` / ``chunk_fatal``: raise (exit 1, retried / exit 42, the index fails);
- ``bigtable_cut_off``: the lock keeper's renewals fail from now on and the chunk waits,
  so the claim nears its expiry, the keeper cancels it and the harness ends the attempt
  (exit 1); the chunk is redone by the next attempt;
- ``pod_sigkill`` / ``pod_preempted`` / ``node_lost``: hold the chunk mid-way and tell the
  injector, which SIGKILLs, preempts (SIGTERM + DisruptionTarget) or loses this pod; a
  preempted pod is released and finishes its chunk within the grace period.

Without ``PCG_CHAOS_DIR``: one environment lookup per call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from shared.adapters.local import chaos_mailbox as mb
from worker.errors import FatalChunkError

__all__ = ["ChaosTransientError", "after_done", "after_plugin", "before_plugin"]

HOLD_KINDS = ("pod_sigkill", "pod_preempted", "node_lost")
HOLD_TIMEOUT_S = 60.0  # an injector that never acts leaves the chunk to go on


class ChaosTransientError(RuntimeError):
    """An injected transient chunk error (the index is retried)."""


def _root() -> Path | None:
    root = os.environ.get(mb.CHAOS_DIR_ENV)
    return Path(root) if root else None


def _pod() -> str:
    return os.environ.get("HOSTNAME", f"pid-{os.getpid()}")


def _record(root: Path, event: str, ctx: Any, **extra: Any) -> None:
    mb.audit(
        root,
        _pod(),
        {
            "event": event,
            "stage": ctx.stage,
            "layer": ctx.layer,
            "chunk_id": ctx.chunk_id,
            "token": ctx.token,
            "previous_token": ctx.previous_token,
            **extra,
        },
    )


def before_plugin(ctx: Any, ledger: Any, log: Any) -> None:
    """Audit the attempt's start; play the oldest armed fault on this chunk, if any."""
    root = _root()
    if root is None:
        return
    _record(root, "begun", ctx)
    fault = mb.take(root, _pod())
    if fault is None:
        return
    kind = fault["kind"]
    log.warning(f"chaos: {kind} on this chunk", chaos_fault=fault["fault_id"])
    log.flush()
    if kind == "chunk_transient":
        raise ChaosTransientError(f"chaos {fault['fault_id']}: injected transient error")
    if kind == "chunk_fatal":
        raise FatalChunkError(f"chaos {fault['fault_id']}: injected fatal error")
    if kind == "bigtable_cut_off":
        _cut_off(ledger, ctx)
    elif kind in HOLD_KINDS:
        mb.hold(root, fault, HOLD_TIMEOUT_S)


def _cut_off(ledger: Any, ctx: Any) -> None:
    """Renewals fail from now on; wait until the lock keeper cancels the claim."""

    def unreachable(chunk_id: int, token: int) -> bool:
        raise ConnectionError("chaos: Bigtable unreachable from this worker")

    ledger.renew = unreachable
    expiry = ledger.lock_expiry.total_seconds()
    if ctx.cancelled is not None:
        ctx.cancelled.wait(expiry * 1.5)


def after_plugin(ctx: Any) -> None:
    """Audit that the plugin ran this chunk to completion."""
    root = _root()
    if root is not None:
        _record(root, "returned", ctx)


def after_done(ctx: Any) -> None:
    """Audit that this attempt's done marker was written."""
    root = _root()
    if root is not None:
        _record(root, "done", ctx)
