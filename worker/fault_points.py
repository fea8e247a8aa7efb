"""Named pause points for crash tests: ``PCG_TEST_PAUSE_AT=<name>`` makes the worker log
``paused at <name>`` and sleep there, so a test can SIGKILL it at a known point of a chunk.

Points (in the order a chunk meets them): ``after_claim`` (claimed, nothing recorded),
``after_begin`` (attempt recorded, the plugin not yet called), the plugin's own (the demo
ingest: ``ingest_after_note``, ``ingest_mid_write``), ``before_done`` (the plugin returned,
the done marker not yet written). Unset in production: one environment lookup per point.

The renewal cut (:data:`RENEWALS`) is the other fault point: once cut (the chaos fault
``bigtable_cut_off``, the tests' unrenewable plugins), every renewal through the harness's
ledger (:class:`GatedLedger`, the seam the harness builds its ledger with) raises, as when
Bigtable became unreachable from this worker. Never cut in production: one flag check per
renewal.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

__all__ = ["PAUSE_ENV", "RENEWALS", "GatedLedger", "RenewalCut", "pause_point"]

PAUSE_ENV = "PCG_TEST_PAUSE_AT"


def pause_point(name: str, log: Any) -> None:
    """Sleep forever (until killed) if ``PCG_TEST_PAUSE_AT`` names this point."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    log.warning(f"paused at {name}", pause_point=name)
    log.flush()
    while True:
        time.sleep(3600)


class RenewalCut:
    """Whether this worker's lock renewals fail from now on (Bigtable cut off)."""

    def __init__(self) -> None:
        self._cut = threading.Event()
        self._reason = ""

    def cut(self, reason: str) -> None:
        """Every renewal checked from now on raises ConnectionError(`reason`)."""
        self._reason = reason
        self._cut.set()

    def check(self) -> None:
        """Raise as an unreachable Bigtable would, once cut."""
        if self._cut.is_set():
            raise ConnectionError(self._reason)


RENEWALS = RenewalCut()  # this process's: a worker is one process


class GatedLedger:
    """A chunk ledger whose renewals pass the renewal cut first; every other call goes to
    the ledger it wraps unchanged."""

    def __init__(self, ledger: Any, gate: RenewalCut = RENEWALS) -> None:
        self._ledger, self._gate = ledger, gate

    def renew(self, chunk_id: int, token: int) -> bool:
        """The wrapped ledger's renewal, unless the renewals were cut."""
        self._gate.check()
        return bool(self._ledger.renew(chunk_id, token))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)
