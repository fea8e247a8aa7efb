"""How a PyChunkedGraph image claims, renews and finishes a chunk, for code that runs in the
predecessor's Python 3.12 venv (tests/builders/pcg_harness.py): the ingest harness entry
point (tests/builders/pcg_ingest.py) and the claim race (tests/builders/pcg_claim_race.py).

It follows PyChunkedGraph's ingest worker (``pychunkedgraph/pipeline/ingest/worker.py``) on
the predecessor's lock (``cave_pipeline.distribution.lock``, 0.0.4):

- the claim lives for the kvdbclient client's ``lock_expiry``, which ``ChunkedGraph`` takes
  from the graph's ``graph_config.ROOT_LOCK_EXPIRY`` (PyChunkedGraph's default 3 minutes);
  the lock ignores the expiry the worker passes to ``acquire``;
- the worker computes ``expiry = timedelta(minutes=3 x (L-1) x PCG_LOCK_EXPIRY_SCALE)`` and
  renews from a heartbeat thread every ``expiry.total_seconds() / 3`` while the chunk runs
  (``stop.wait(interval)``; the loop ends on the first failed renewal);
- a held claim is polled every ``PCG_LOCK_POLL_SEC`` (10) until ``PCG_HELD_MAX_WAIT_SEC``
  (120), then the chunk is deferred ("transient"); done chunks are skipped ("done");
- after the work, a failure releases the claim, success marks done fenced on the claim
  ("ok", or "transient" when the claim was lost).

This is the image's arithmetic, written here so a test can run it; nothing in it comes from
the controller. The dataset's ROOT_LOCK_EXPIRY is read as seconds (see
docs/images-chunk-lock.md).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

DEFAULT_ROOT_LOCK_EXPIRY = timedelta(minutes=3)  # PyChunkedGraph's GraphConfig default


def graph_lock_expiry(dataset: dict[str, Any]) -> timedelta:
    """The kvdbclient client's lock expiry as ``ChunkedGraph`` sets it: the graph's
    ``graph_config.ROOT_LOCK_EXPIRY`` (seconds here), else 3 minutes."""
    raw = (dataset.get("graph_config") or {}).get("ROOT_LOCK_EXPIRY")
    return DEFAULT_ROOT_LOCK_EXPIRY if raw is None else timedelta(seconds=float(raw))


def image_expiry(layer: int, scale: float) -> timedelta:
    """The ingest worker's ``_expiry``: 3 min x (L-1) x scale (the lock ignores it)."""
    return timedelta(minutes=3 * (layer - 1) * scale)


def image_scale() -> float:
    """``PCG_LOCK_EXPIRY_SCALE`` as the image reads it (1 when unset)."""
    return float(os.environ.get("PCG_LOCK_EXPIRY_SCALE", 1))


def image_options(layer: int, scale: float) -> dict[str, float | timedelta]:
    """The worker's per-batch options: expiry, renewal interval, poll, held max wait."""
    expiry = image_expiry(layer, scale)
    return {
        "expiry": expiry,
        "renew": expiry.total_seconds() / 3,
        "poll": float(os.environ.get("PCG_LOCK_POLL_SEC", 10)),
        "held_max_wait": float(os.environ.get("PCG_HELD_MAX_WAIT_SEC", 120)),
    }


def _renew_loop(client: Any, chunk_id: int, token: int, interval: float, stop: Any) -> None:
    from cave_pipeline.distribution import lock

    while not stop.wait(interval):
        if not lock.renew(client, chunk_id, token):
            return


def process_under_claim(
    client: Any,
    chunk_id: int,
    token: int,
    opts: dict[str, Any],
    work: Callable[[], None],
    on_fatal: tuple[type[BaseException], ...] = (),
    on_acquired: Callable[[], None] | None = None,
) -> str:
    """One chunk as the image's ``_process_one`` runs it: "done", "ok", "transient" or
    "fatal". ``work`` is the chunk's computation; ``on_fatal`` the exceptions it reports as
    fatal; ``on_acquired`` is called once the claim is held (a test's timestamp)."""
    from cave_pipeline.distribution import lock

    deadline = time.monotonic() + opts["held_max_wait"]
    while True:
        state = lock.acquire(client, chunk_id, token, opts["expiry"])
        if state == lock.DONE:
            return "done"
        if state == lock.ACQUIRED:
            break
        if time.monotonic() >= deadline:
            return "transient"
        time.sleep(opts["poll"])
    if on_acquired is not None:
        on_acquired()
    stop = threading.Event()
    heartbeat = threading.Thread(
        target=_renew_loop, args=(client, chunk_id, token, opts["renew"], stop), daemon=True
    )
    heartbeat.start()
    try:
        work()
        outcome = "ok"
    except on_fatal:
        outcome = "fatal"
    except Exception:  # noqa: BLE001 - the image reports any other failure as transient
        outcome = "transient"
    finally:
        stop.set()
        heartbeat.join()
    if outcome != "ok":
        lock.release(client, chunk_id, token)
        return outcome
    return "ok" if lock.mark_done(client, chunk_id, token) else "transient"
