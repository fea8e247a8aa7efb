"""Named pause points for crash tests: ``PCG_TEST_PAUSE_AT=<name>`` makes the worker log
``paused at <name>`` and sleep there, so a test can SIGKILL it at a known point of a chunk.

Points (in the order a chunk meets them): ``after_claim`` (claimed, nothing recorded),
``after_begin`` (attempt recorded, the plugin not yet called), the plugin's own (the demo
ingest: ``ingest_after_note``, ``ingest_mid_write``), ``before_done`` (the plugin returned,
the done marker not yet written). Unset in production: one environment lookup per point.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["PAUSE_ENV", "pause_point"]

PAUSE_ENV = "PCG_TEST_PAUSE_AT"


def pause_point(name: str, log: Any) -> None:
    """Sleep forever (until killed) if ``PCG_TEST_PAUSE_AT`` names this point."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    log.warning(f"paused at {name}", pause_point=name)
    log.flush()
    while True:
        time.sleep(3600)
