"""Local stand-in for Cloud Scheduler: the heartbeat published to `ticks` every period."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("cave_pipeline.scheduler")


class Ticker:
    """Local stand-in for Cloud Scheduler: publishes `{"at": ...}` to `ticks` periodically."""

    def __init__(self, publish: Callable[[], None], period_s: float) -> None:
        self.publish, self.period_s = publish, period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ticker", daemon=True)

    def start(self) -> Ticker:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.publish()
            except Exception as e:  # a missed tick is harmless; the next one comes
                log.warning("tick not published: %s", e)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
