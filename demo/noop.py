"""A workload that builds nothing: each chunk returns at once, so a build of it measures what
the layers' Jobs, their pods and the workers' ledger cost alone, the floor under the demo's
wall time (`python bench/bench_demo_overhead.py --variants floor,after`). Its graph is empty,
so the demo's oracle fails on it, as it should."""

from __future__ import annotations

from typing import Any


def process_chunk(ctx: Any) -> None:
    """Nothing to build: the chunk's claim, attempt record and done marker are the harness's."""
    del ctx
