"""Keeps this worker's chunk claims alive: renews them on a daemon thread, well within the
lock expiry, and notices a claim that lapsed anyway."""

from __future__ import annotations

import threading

from shared.adapters.bigtable.chunk_ledger import ChunkLedger
from worker.logs import JsonLogger

__all__ = ["LockKeeper"]


class LockKeeper:
    """Renews the claims this worker holds every ``interval`` seconds on a daemon thread."""

    def __init__(self, ledger: ChunkLedger, token: int, interval: float, log: JsonLogger):
        self.ledger, self.token, self.interval, self.log = ledger, token, interval, log
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.lost: set[int] = set()
        self._thread = threading.Thread(target=self._run, name="lock-renewer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def hold(self, cid: int) -> None:
        with self._lock:
            self._held.add(cid)

    def drop(self, cid: int) -> None:
        with self._lock:
            self._held.discard(cid)

    def held(self) -> list[int]:
        with self._lock:
            return sorted(self._held)

    def release_all(self) -> None:
        """Release every held claim (best effort: a failure is logged, the lock then lapses)."""
        for cid in self.held():
            self.drop(cid)  # first, so a renewal racing the release is not taken as a loss
            try:
                self.ledger.release(cid, self.token)
            except Exception as exc:  # noqa: BLE001
                self.log.warning(f"could not release chunk {cid}: {exc!r}", chunk_id=cid)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for cid in self.held():
                try:
                    ok = self.ledger.renew(cid, self.token)
                except Exception as exc:  # noqa: BLE001 - retried next interval
                    self.log.warning(f"lock renewal of chunk {cid} failed: {exc!r}", chunk_id=cid)
                    continue
                if not ok and cid in self.held():  # dropped meanwhile = done, not lost
                    self.lost.add(cid)
                    self.log.error(f"lost the lock on chunk {cid}: it lapsed", chunk_id=cid)
