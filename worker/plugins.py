"""The plugin interface: the per-chunk function a stage names by import path
(``PCG_WORKLOAD``, ``package.module:function``), and the context it is called with."""

from __future__ import annotations

import importlib
import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from worker.errors import ClaimLostError, WorkerConfigError
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


def _no_note(note: bytes) -> None:
    raise ClaimLostError("this context has no chunk ledger to save a note in")


@dataclass
class ChunkContext:
    """What a plugin gets for one chunk.

    Crash safety: ``recovering`` is True when an earlier attempt at this chunk began and never
    finished (killed part-way, or failed after writing): the plugin must then clean up or
    overwrite what that attempt wrote. ``previous_token`` is that attempt's claim token (None
    if unknown) and ``note`` the recovery note it saved. A plugin whose writes are not
    idempotent saves, *before* writing, what a later attempt needs to undo them
    (``save_note(bytes)``: e.g. the node ids it allocated); the note is fenced (written only
    while the claim is ours, else :class:`~worker.errors.ClaimLostError`).

    Cancellation: ``cancelled`` is set when the claim is lost or cannot be renewed in time.
    A long plugin calls ``check_cancelled()`` between steps (it raises ClaimLostError);
    one that cannot be interrupted is ended by the harness with ``os._exit(1)`` before its
    claim can lapse.
    """

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
    token: int = 0
    recovering: bool = False
    previous_token: int | None = None
    note: bytes | None = None
    save_note: Callable[[bytes], None] = _no_note
    cancelled: threading.Event = field(default_factory=threading.Event)

    def check_cancelled(self) -> None:
        """Raise :class:`~worker.errors.ClaimLostError` if the claim is lost or expiring."""
        if self.cancelled.is_set():
            raise ClaimLostError(
                f"the claim on chunk {self.layer}_{tuple(self.coord)} was lost: stopping"
            )
