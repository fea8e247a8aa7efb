"""The plugin interface: the per-chunk function a stage names by import path
(``PCG_WORKLOAD``, ``package.module:function``), and the context it is called with."""

from __future__ import annotations

import importlib
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worker.errors import WorkerConfigError
from worker.logs import JsonLogger

__all__ = ["ChunkContext", "load_workload"]


def load_workload(path: str) -> Callable[[ChunkContext], Any]:
    """Import the plugin ``package.module:function``; errors name ``PCG_WORKLOAD``."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise WorkerConfigError(f"PCG_WORKLOAD={path!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, SyntaxError, errors at import time
        raise WorkerConfigError(
            f"PCG_WORKLOAD={path!r}: cannot import {module_name}: {exc!r}"
        ) from exc
    try:
        fn = operator.attrgetter(attr)(module)
    except AttributeError:
        raise WorkerConfigError(f"PCG_WORKLOAD={path!r}: {module_name} has no {attr}") from None
    if not callable(fn):
        raise WorkerConfigError(f"PCG_WORKLOAD={path!r}: {attr} is not callable")
    return fn


@dataclass
class ChunkContext:
    """What a plugin gets for one chunk."""

    graph_id: str
    stage: str
    layer: int
    coord: tuple[int, int, int]
    chunk_id: int
    n_layers: int
    dataset: dict[str, Any]
    client: Any  # the kvdbclient BigTableClient of the graph's table
    logger: JsonLogger
    run_id: str = ""
