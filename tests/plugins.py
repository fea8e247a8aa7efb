"""Small per-chunk plugins for the worker contract tests (``PCG_WORKLOAD=tests.plugins:...``)."""

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
