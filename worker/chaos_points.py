"""Chaos fault points of a chunk attempt (`pipeline demo --chaos`), unset in production.

With ``PCG_CHAOS_DIR`` set (the demo's chaos mailbox, ``adapters.chaos_mailbox``)
the harness calls :func:`before_plugin` once the attempt is recorded, :func:`after_plugin`
when the plugin returned, and :func:`after_done` once the done marker is written. Each
appends an audit record (``begun``, ``returned``, ``done``; the chaos verdict reads them only
to explain what it finds in the tables), and :func:`before_plugin` takes the oldest armed
chunk-level fault, if any, and plays it on this chunk:

- ``chunk_transient`` / ``chunk_fatal``: raise (exit 1, retried / exit 42, the index fails);
- ``bigtable_cut_off``: the lock keeper's renewals fail from now on (the renewal cut,
  ``worker.fault_points.RENEWALS``) and the chunk waits,
  so the claim nears its expiry, the keeper cancels it and the harness ends the attempt
  (exit 1); the chunk is redone by the next attempt.

Pod-level faults (``pod_sigkill``, ``pod_preempted``, ``node_lost``) strike *inside the
workload's writes*: the harness hands its plugin a :class:`ChaosClient` (:func:`client_for`),
whose ``write`` :func:`before_plugin` arms for the attempt,
and the first write that put rows in the table takes the oldest armed pod-level fault and
holds there, rows written and no done marker, while the injector acts on the pod:

- ``pod_sigkill``: SIGKILLed mid-write;
- ``pod_preempted``: SIGTERM with DisruptionTarget; the worker ignores it (it stays held)
  until the harness gives up the chunk at the end of its grace period or the kubelet's
  SIGKILL comes;
- ``node_lost``: the pod deleted from the API with its node; the process is SIGKILLed, or
  (a *zombie*, a node cut off from the API but not from Bigtable) released: it records
  ``zombie_resumed`` and goes on with its chunk at once, as a real one would. Its lock keeper
  still renews its claim, so the replacement pod may not take it over (docs/zombies.md): it
  waits, and finds the chunk done by the zombie. The zombie exits at its next chunk. Its claims from
  then on go through :func:`claim`, which records each (``zombie_claim``: the result, the
  holder it met and whether that holder's claim was live); a claim refused because the
  holder is live (our replacement) ends the zombie there (docs/zombies.md).

``pod_hung`` (opt-in) takes the same point and hangs there for good: alive, its claim renewed,
no progress, until the controller's hung-worker detection deletes the pod.

Every write in chaos mode is recorded (``wrote``) so the verdict sees attempts still writing
after a successor began. Without ``PCG_CHAOS_DIR``: one environment lookup per call.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters import chaos_mailbox as mb
from adapters.bigtable.chunk_ledger import ClaimResult
from worker.errors import EXIT_TRANSIENT, FatalChunkError
from worker.fault_points import RENEWALS

__all__ = ["ChaosTransientError", "after_done", "after_plugin", "before_plugin", "claim"]

HOLD_KINDS = ("pod_sigkill", "pod_preempted", "node_lost")
HUNG = "pod_hung"  # opt-in: hangs mid-write, its lock keeper still renewing
CHUNK_KINDS = ("chunk_transient", "chunk_fatal", "bigtable_cut_off")
HOLD_TIMEOUT_S = 60.0  # an injector that never acts leaves the chunk to go on

_zombie = False  # this process is a lost node's zombie: it ends at its next chunk


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


def claim(
    ledger: Any, cid: int, token: int, lineage: tuple[int, int] | None, log: Any
) -> ClaimResult:
    """``ledger.claim(cid, token, lineage)``; in a zombie, also record what the claim met
    (``zombie_claim``: ``result``, ``holder_token``, ``holder_age_s``, and ``live``: the
    holder was another attempt of this Job index that renewed within the takeover window),
    and leave when a live holder refused it: a zombie goes no further."""
    root = _root() if _zombie else None
    if root is None:
        return ledger.claim(cid, token, lineage)
    holder = ledger.holder(cid)
    result = ledger.claim(cid, token, lineage)
    age = None if holder is None else (_now() - holder.written_at).total_seconds()
    live = (
        holder is not None
        and age is not None
        and lineage is not None
        and holder.token != token
        and lineage[0] <= holder.token <= lineage[1]
        and age < ledger.takeover_after.total_seconds()
    )
    mb.audit(
        root,
        _pod(),
        {
            "event": "zombie_claim",
            "stage": ledger.stage,
            "chunk_id": cid,
            "token": token,
            "result": result.value,
            "holder_token": None if holder is None else holder.token,
            "holder_age_s": None if age is None else round(age, 3),
            "live": live,
        },
    )
    if result is ClaimResult.HELD_BY_OTHER:
        log.warning("chaos: zombie refused a live claim; leaving")
        log.flush()
        os._exit(EXIT_TRANSIENT)
    return result


def _now() -> datetime:
    return datetime.now(UTC)


def before_plugin(ctx: Any, ledger: Any, log: Any) -> None:
    """Audit the attempt's start; play the oldest armed chunk-level fault on this chunk, if
    any; arm the mid-write point for pod-level faults."""
    root = _root()
    if root is None:
        return
    _record(root, "begun", ctx)
    if _zombie:  # a zombie's chunk ended (fenced or not): it goes no further
        # It claimed and recorded this attempt first (begun above, so the next attempt's
        # chain of prior attempts stays whole): the next attempt finds and recovers it.
        _record(root, "zombie_exit", ctx)
        log.warning("chaos: zombie leaving at its next chunk")
        log.flush()
        os._exit(EXIT_TRANSIENT)
    _wrap_writes(root, ctx, log)
    fault = mb.take(root, _pod(), CHUNK_KINDS)
    if fault is None:
        return
    kind = fault["kind"]
    log.warning(f"chaos: {kind} on this chunk", chaos_fault=fault["fault_id"])
    log.flush()
    if kind == "chunk_transient":
        raise ChaosTransientError(f"chaos {fault['fault_id']}: injected transient error")
    if kind == "chunk_fatal":
        raise FatalChunkError(f"chaos {fault['fault_id']}: injected fatal error")
    _cut_off(ledger, ctx)


def _cut_off(ledger: Any, ctx: Any) -> None:
    """Renewals fail from now on; wait until the lock keeper cancels the claim."""
    RENEWALS.cut("chaos: Bigtable unreachable from this worker")
    expiry = ledger.lock_expiry.total_seconds()
    if ctx.cancelled is not None:
        ctx.cancelled.wait(expiry * 1.5)


class _ChaosWrites:
    """The table client's ``write`` for one attempt: recorded, and the mid-write fault
    point after the first write that put rows in the table."""

    def __init__(self, original: Any, root: Path, ctx: Any, log: Any) -> None:
        self.original, self.root, self.ctx, self.log = original, root, ctx, log
        self.armed = True  # one pod-level fault per attempt at most

    def __call__(self, rows: Any, *args: Any, **kwargs: Any) -> Any:
        rows = list(rows)
        out = self.original(rows, *args, **kwargs)
        n = sum(not _only_deletes(r) for r in rows)  # a recovering attempt's cleanup is not
        _record(self.root, "wrote", self.ctx, rows=len(rows), puts=n)  # a partial write
        if self.armed and n:
            self.armed = False
            fault = mb.take(self.root, _pod(), (*HOLD_KINDS, HUNG))
            if fault is not None and fault["kind"] == HUNG:
                self._hang(fault, n)
            elif fault is not None:
                self._hold(fault, n)
        return out

    def _hold(self, fault: dict[str, Any], rows: int) -> None:
        global _zombie
        ctx = self.ctx
        self.log.warning(
            f"chaos: {fault['kind']} mid-write ({rows} rows written, no done marker)",
            chaos_fault=fault["fault_id"],
        )
        self.log.flush()
        attempt = {"stage": ctx.stage, "layer": ctx.layer, "chunk_id": ctx.chunk_id}
        released = mb.hold(self.root, fault, HOLD_TIMEOUT_S, token=ctx.token, **attempt)
        if released and fault.get("zombie"):
            # It does not know it is a zombie: it goes on at once, its claim still renewed.
            _zombie = True
            fenced = ctx.cancelled is not None and ctx.cancelled.is_set()
            _record(self.root, "zombie_resumed", ctx, fenced=bool(fenced))

    def _hang(self, fault: dict[str, Any], rows: int) -> None:
        """No progress from here on, the claim still renewed by the lock keeper's thread,
        until the pod is deleted (SIGTERM: the harness gives the chunk up after its grace)."""
        self.log.warning(
            f"chaos: pod_hung mid-write ({rows} rows written): no progress from here on",
            chaos_fault=fault["fault_id"],
        )
        self.log.flush()
        _record(self.root, "hung", self.ctx)
        while True:
            time.sleep(3600)


def _only_deletes(row: Any) -> bool:
    mutations = getattr(row, "mutations", None)
    return bool(mutations) and all(type(m).__name__ == "DeleteAllFromRow" for m in mutations)


class ChaosClient:
    """The table client a chunk's plugin gets in chaos mode (:func:`client_for`): while an
    attempt is armed (:func:`before_plugin` to :func:`after_plugin`) its ``write`` passes the
    attempt's fault point (:class:`_ChaosWrites`); everything else is the client's own."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._writes: _ChaosWrites | None = None

    def arm(self, root: Path, ctx: Any, log: Any) -> None:
        """Record this attempt's writes and hold the first one that puts rows, if asked."""
        self._writes = _ChaosWrites(self._client.write, root, ctx, log)

    def disarm(self) -> None:
        self._writes = None

    def write(self, rows: Any, *args: Any, **kwargs: Any) -> Any:
        writes = self._writes
        if writes is None:
            return self._client.write(rows, *args, **kwargs)
        return writes(rows, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def client_for(client: Any) -> Any:
    """The table client the harness hands its plugin: `client` itself unless chaos is on
    (``PCG_CHAOS_DIR``), then a :class:`ChaosClient` around it."""
    return ChaosClient(client) if _root() is not None else client


def _wrap_writes(root: Path, ctx: Any, log: Any) -> None:
    client = getattr(ctx, "client", None)
    if isinstance(client, ChaosClient):
        client.arm(root, ctx, log)


def after_plugin(ctx: Any) -> None:
    """Audit that the plugin ran this chunk to completion."""
    root = _root()
    if root is not None:
        client = getattr(ctx, "client", None)
        if isinstance(client, ChaosClient):
            client.disarm()
        _record(root, "returned", ctx)


def after_done(ctx: Any) -> None:
    """Audit that this attempt's done marker was written."""
    root = _root()
    if root is not None:
        _record(root, "done", ctx)
