"""How many requests a second the local Bigtable emulator serves: the figure behind the local
stack's `PIPELINE_LOCAL_BIGTABLE_RPS` (the request rate that counts as full CPU).

The Bigtable emulator is started here on a free port, with the local stack's request meter
(`adapters.local.bigtable_meter.BigtableMeter`) in front of it, as in the stack. For each
number of client processes (`--clients`, as pods: one process each, so no GIL is shared),
every process runs the worker's per-chunk ledger round for `--seconds`: claim, begin,
done marker (`BigtableChunkLedger`), each on a chunk of its own. Prints, per client count,
the requests a second the meter counted and the rounds a second, and a final JSON line; the
saturation is the highest rate: more clients no longer raise it.

    PYTHONPATH=$PWD python3 bench/bench_bigtable_capacity.py [--clients 1,2,4,8] [--seconds 5]

A figure of this machine while it runs nothing else; the emulator is single-process Go, so
it shares the cores with the clients, as it shares them with the pods in a demo.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.common.termination import run_script  # noqa: E402
from adapters.local.bigtable_meter import BigtableMeter  # noqa: E402
from adapters.local.emulators import EmulatorSet  # noqa: E402

PROJECT, INSTANCE, TABLE = "bench", "bench", "capacity"
EXPIRY = timedelta(seconds=60)


def _rounds(address: str, worker: int, ready: Any, go: Any, stop: Any, out: Any) -> None:
    """One client process: ledger rounds on chunks of its own from `go` until `stop`."""
    os.environ["BIGTABLE_EMULATOR_HOST"] = address
    from adapters.bigtable.chunk_ledger import (
        BigtableChunkLedger,
        close_bigtable_client,
        open_bigtable_client,
    )

    client = open_bigtable_client(TABLE, PROJECT, INSTANCE, EXPIRY)
    ledger = BigtableChunkLedger(client)
    ledger.is_done(worker)  # the channel up before the clock starts
    ready.put(worker)
    go.wait()
    rounds, chunk = 0, worker * 10_000_000 + 1
    while not stop.is_set():
        token = 1000 + rounds
        ledger.claim(chunk, token)
        ledger.begin(chunk, token)
        ledger.mark_done(chunk, token)
        rounds, chunk = rounds + 1, chunk + 1
    out.put(rounds)
    close_bigtable_client(client)


def measure(meter: BigtableMeter, clients: int, seconds: float) -> dict[str, Any]:
    """The request and round rates of `clients` processes running together for `seconds`
    (they import and connect first; the clock starts when all are ready)."""
    ctx = mp.get_context("spawn")
    ready, out, go, stop = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    # Daemons, stopped in the finally: a bench stopped (Ctrl-C, SIGTERM, a timeout) while
    # they wait on `go` or run leaves no client process behind.
    procs = [
        ctx.Process(target=_rounds, args=(meter.address, i, ready, go, stop, out), daemon=True)
        for i in range(clients)
    ]
    try:
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=120)
        before = meter.total
        go.set()
        time.sleep(seconds)
        stop.set()
        requests = meter.total - before  # the rounds in flight at the stop are counted too
        rounds = sum(out.get(timeout=60) for _ in procs)
    finally:
        stop.set()
        go.set()  # a client still waiting to begin sees the stop at once
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    return {
        "clients": clients,
        "requests_per_s": round(requests / seconds),
        "rounds_per_s": round(rounds / seconds),
        "requests_per_round": round(requests / max(rounds, 1), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    with EmulatorSet(["bigtable"]) as emulators:
        meter = BigtableMeter(emulators["bigtable"].address).start()
        try:
            os.environ["BIGTABLE_EMULATOR_HOST"] = meter.address
            from adapters.bigtable.chunk_ledger import close_bigtable_client, open_bigtable_client

            close_bigtable_client(open_bigtable_client(TABLE, PROJECT, INSTANCE, EXPIRY, True))
            rows = []
            for n in counts:
                row = measure(meter, n, args.seconds)
                rows.append(row)
                print(
                    f"{n} clients: {row['requests_per_s']:,} requests/s "
                    f"({row['rounds_per_s']:,} claim+begin+done rounds/s, "
                    f"{row['requests_per_round']} requests each)",
                    flush=True,
                )
        finally:
            meter.stop()
    best = max(rows, key=lambda r: r["requests_per_s"])
    print(f"saturation: {best['requests_per_s']:,} requests/s at {best['clients']} clients")
    print(json.dumps({"rows": rows, "saturation_rps": best["requests_per_s"]}))


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: stop the emulator first
