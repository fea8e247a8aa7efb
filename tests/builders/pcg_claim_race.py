"""A live PyChunkedGraph ingest worker against a contender for the same chunk, on the
predecessor's lock (run by the predecessor's Python 3.12 venv, tests/builders/pcg_harness.py).

    python -m tests.builders.pcg_claim_race TABLE LAYER SCALE LIFETIME_S CHUNK_S

Both sides run the image's claim code (tests/builders/pcg_image_lock.py) with their own
kvdbclient client, whose lock expiry is the graph's ROOT_LOCK_EXPIRY (LIFETIME_S): the holder
claims the chunk and works on it for CHUNK_S, renewing every 60 s x (L-1) x SCALE as the
image does; once it holds the claim, the contender (a replacement pod, a zombie after a node
loss) tries the same chunk every ``PCG_LOCK_POLL_SEC`` until ``PCG_HELD_MAX_WAIT_SEC``. If it
gets the claim it builds the chunk too (a short piece of work) and marks it done.

Prints one JSON object: both outcomes, when each acquired (seconds after the holder did),
when the holder finished, and the renewal interval and lifetime used. Needs
``BIGTABLE_EMULATOR_HOST``, ``BIGTABLE_PROJECT`` and ``BIGTABLE_INSTANCE``; the table must
exist with kvdbclient's column families.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

CHUNK_ID = (6 << 56) | 1  # a layer-6 chunk id; only its bytes matter to the lock row
CONTENDER_WORK_S = 0.1


def _client(table: str, dataset: dict[str, Any]) -> Any:
    from kvdbclient import BigTableClient, BigTableConfig

    from tests.builders.pcg_image_lock import graph_lock_expiry

    config = BigTableConfig(
        PROJECT=os.environ["BIGTABLE_PROJECT"],
        INSTANCE=os.environ["BIGTABLE_INSTANCE"],
        ADMIN=False,
        READ_ONLY=False,
    )
    return BigTableClient(table, config, lock_expiry=graph_lock_expiry(dataset))


def race(table: str, layer: int, scale: float, lifetime_s: float, chunk_s: float) -> dict:
    """Run holder and contender on one chunk; what happened to each."""
    from tests.builders.pcg_image_lock import image_options, process_under_claim

    dataset = {"graph_config": {"ROOT_LOCK_EXPIRY": lifetime_s}}
    opts = image_options(layer, scale)
    t0 = time.monotonic()
    events: dict[str, float] = {}
    held = threading.Event()
    result: dict[str, Any] = {}

    def mark(name: str) -> None:
        events[name] = round(time.monotonic() - t0, 3)

    def holder() -> None:
        def acquired() -> None:
            mark("holder_acquired")
            held.set()

        result["holder"] = process_under_claim(
            _client(table, dataset),
            CHUNK_ID,
            1001,
            opts,
            lambda: time.sleep(chunk_s),
            on_acquired=acquired,
        )
        mark("holder_finished")

    def contender() -> None:
        held.wait()
        result["contender"] = process_under_claim(
            _client(table, dataset),
            CHUNK_ID,
            2002,
            opts,
            lambda: time.sleep(CONTENDER_WORK_S),
            on_acquired=lambda: mark("contender_acquired"),
        )
        mark("contender_finished")

    threads = [threading.Thread(target=holder), threading.Thread(target=contender)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    start = events.get("holder_acquired", 0.0)
    return {
        "layer": layer,
        "scale": scale,
        "lifetime_s": lifetime_s,
        "renew_s": opts["renew"],
        "chunk_s": chunk_s,
        "holder": result.get("holder"),
        "contender": result.get("contender"),
        **{k: round(v - start, 3) for k, v in events.items()},
    }


def main(argv: list[str]) -> int:
    table, layer, scale, lifetime_s, chunk_s = argv
    out = race(table, int(layer), float(scale), float(lifetime_s), float(chunk_s))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # as the images leave: the Bigtable client's threads would hold exit
