"""Keeps this worker's chunk claims alive, and ends an attempt before its claim can lapse.

Two daemon threads, so a renewal stuck in a slow or unreachable Bigtable never delays the
deadline checks:

- the *renewer* renews each held claim every ``expiry / 3``, at most every 10 s (retrying
  sooner, every ``expiry / 20`` or a third of that interval, after a failure;
  ``shared.model.claim_timing``). The cap keeps a live claim's newest lock cell younger than the
  takeover window, so a zombie of this Job index cannot take over the claim of a live
  replacement (docs/zombies.md);
- the *watchdog* checks every claim against its deadline. A claim's age is counted from the
  moment the last successful renewal (or the claim itself) was *sent*, which is no later than
  the lock cell's time stamp, so the age is never under-estimated.

A renewal that raises counts towards loss: it does not refresh the claim. When a claim's age
passes ``expiry - margin`` (``margin = expiry / 4``) the claim is *expiring*: its cancel event
is set (a workload that calls ``ctx.check_cancelled()`` stops), an ERROR ``claim_lost`` record
is logged, and ``on_expiring`` is called (the harness then ends the pod with exit 1 once the
chunk returns). A renewal answered "not yours" makes the claim *lost* at once, same record and
cancel event. Either way, if the chunk function is still running ``margin / 2`` later (it
cannot be interrupted), ``on_overdue`` is called: the harness leaves through ``os._exit(1)``
before the claim can lapse, so no two live workers ever compute one chunk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.model.claim_timing import renew_interval_s, retry_interval_s
from shared.ports.chunk_ledger import ChunkLedger
from worker.logs import JsonLogger

__all__ = ["CLAIM_LOST", "LockKeeper"]

#: The ``event`` field of the ERROR record of a lost or expiring claim (alerts match it).
CLAIM_LOST = "claim_lost"


@dataclass
class _Claim:
    last_ok: float  # when the last successful claim/renewal request was sent
    last_try: float
    cancel: threading.Event = field(default_factory=threading.Event)
    cancelled_at: float | None = None
    overdue_called: bool = False


class LockKeeper:
    """Renews the claims this worker holds and watches their deadlines.

    Args:
        ledger, token: whose claims.
        expiry_s: the lock expiry (the kvdbclient client's).
        log: where ``claim_lost`` records go.
        on_expiring: called (watchdog thread) with a chunk id whose claim could not be renewed
            within the margin.
        on_overdue: called (watchdog thread) when a cancelled chunk is still running
            ``margin / 2`` later; expected not to return (``os._exit``).
    """

    def __init__(
        self,
        ledger: ChunkLedger,
        token: int,
        expiry_s: float,
        log: JsonLogger,
        on_expiring: Callable[[int], None] = lambda cid: None,
        on_overdue: Callable[[int], None] = lambda cid: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ledger, self.token, self.log, self.clock = ledger, token, log, clock
        self.expiry = float(expiry_s)
        self.renew_every = renew_interval_s(self.expiry)
        self.retry_every = retry_interval_s(self.expiry)
        self.margin = self.expiry / 4
        self.on_expiring, self.on_overdue = on_expiring, on_overdue
        self._claims: dict[int, _Claim] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.lost: set[int] = set()  # "not yours" answers
        self.expiring: set[int] = set()  # not renewed within the margin
        self._threads = [
            threading.Thread(target=self._renew_loop, name="lock-renewer", daemon=True),
            threading.Thread(target=self._watch_loop, name="lock-watchdog", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()

    def hold(self, cid: int, since: float) -> threading.Event:
        """Watch ``cid``, claimed by a request sent at ``since`` (``clock`` time); returns the
        chunk's cancel event."""
        claim = _Claim(last_ok=since, last_try=since)
        with self._lock:
            self._claims[cid] = claim
        return claim.cancel

    def drop(self, cid: int) -> None:
        with self._lock:
            self._claims.pop(cid, None)

    def held(self) -> list[int]:
        with self._lock:
            return sorted(self._claims)

    def troubled(self, cid: int) -> bool:
        """Whether ``cid``'s claim was lost or is expiring: never mark it done."""
        return cid in self.lost or cid in self.expiring

    def release_all(self) -> None:
        """Release every held claim (best effort: a failure is logged, the lock then lapses)."""
        for cid in self.held():
            self.drop(cid)  # first, so a renewal racing the release is not taken as a loss
            try:
                self.ledger.release(cid, self.token)
            except Exception as exc:  # noqa: BLE001
                self.log.warning(f"could not release chunk {cid}: {exc!r}", chunk_id=cid)

    # ------------------------------------------------------------------ threads

    def _tick(self) -> float:
        return max(0.02, min(1.0, self.retry_every / 2))

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._tick()):
            now = self.clock()
            with self._lock:
                due = [
                    (cid, c)
                    for cid, c in self._claims.items()
                    if c.cancelled_at is None
                    and now - c.last_try
                    >= (self.renew_every if c.last_try == c.last_ok else self.retry_every)
                ]
            for cid, claim in due:
                self._renew(cid, claim)

    def _renew(self, cid: int, claim: _Claim) -> None:
        sent = self.clock()
        claim.last_try = sent
        try:
            ok = self.ledger.renew(cid, self.token)
        except Exception as exc:  # noqa: BLE001 - counts towards loss; retried sooner
            self.log.warning(
                f"lock renewal of chunk {cid} failed: {exc!r}; retrying in {self.retry_every:g} s",
                chunk_id=cid,
                claim_age_s=round(sent - claim.last_ok, 3),
            )
            return
        with self._lock:
            if self._claims.get(cid) is not claim:
                return  # dropped meanwhile (done or released): not a loss
            if ok:
                claim.last_ok = claim.last_try = sent
                return
            self.lost.add(cid)
        self._cancel(cid, claim, "another worker holds it now (it lapsed and was taken)")

    def _watch_loop(self) -> None:
        while not self._stop.wait(self._tick()):
            now = self.clock()
            with self._lock:
                claims = list(self._claims.items())
            for cid, claim in claims:
                if claim.cancelled_at is None and now - claim.last_ok > self.expiry - self.margin:
                    with self._lock:
                        if self._claims.get(cid) is not claim:
                            continue
                        self.expiring.add(cid)
                    self._cancel(
                        cid,
                        claim,
                        f"not renewed for {now - claim.last_ok:.1f} s of a {self.expiry:g} s "
                        "lock expiry",
                    )
                    self.on_expiring(cid)
                elif (
                    claim.cancelled_at is not None
                    and not claim.overdue_called
                    and now - claim.cancelled_at > self.margin / 2
                    and cid in self.held()
                ):
                    claim.overdue_called = True
                    self.on_overdue(cid)

    def _cancel(self, cid: int, claim: _Claim, why: str) -> None:
        claim.cancelled_at = self.clock()
        claim.cancel.set()
        self.log.error(
            f"{CLAIM_LOST}: the claim on chunk {cid} is lost: {why}; the chunk is abandoned "
            "(not marked done, retried later)",
            event=CLAIM_LOST,
            chunk_id=cid,
            lock_expiry_s=self.expiry,
        )
