"""Extra wall time per SIGKILL of a worker, with and without claim takeover.

Builds the demo graph (ingest, every layer) on the Bigtable emulator with workers as
subprocesses, one per Job index, all indexes at once; an index whose pod exits non-zero is
started again as soon as the pod is gone (``podReplacementPolicy: Failed``). Runs the build
three ways: no kill; K kills with claim takeover (this project: the next attempt takes over
the dead attempt's claim at once); K kills with ``PCG_CLAIM_TAKEOVER=0`` (before: the next
attempt waits out the lock expiry). The kills hit index 0 of layer 2, one per attempt, one
after another (so their costs add up instead of overlapping), each right after the attempt
logged its ``kill_after``-th finished chunk plus half a chunk's sleep, i.e. while it holds
the next chunk's claim. Each
chunk sleeps ``--chunk-sleep`` seconds on top of the real ingest so kills land mid-window.
Every build is checked by the oracle.

    PYTHONPATH=$PWD python3 bench/bench_kill_recovery.py --kills 3 --expiry 20

Prints one line per build and, per kill: the extra wall time against the no-kill build (noisy
on a shared machine), the time the retry waited for the dead attempt's claim, and the time
from the kill to the retry's first finished chunk. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.bigtable.chunk_ledger import (  # noqa: E402
    close_bigtable_client,
    open_bigtable_client,
)
from adapters.local.emulators import EmulatorSet  # noqa: E402
from adapters.local.process_groups import kill_group  # noqa: E402
from adapters.local.termination import run_script  # noqa: E402
from demo.graph_table import read_all_nodes  # noqa: E402
from demo.ingest import process_chunk  # noqa: E402
from demo.oracle import compare, expected_stats, observed_stats  # noqa: E402
from demo.volume import generate_volume, save_volume  # noqa: E402
from shared.model.grid import layer_batch_size, num_batches  # noqa: E402
from shared.model.layers import layer_count, layer_shape  # noqa: E402

PROJECT, INSTANCE = "bench", "bench"
# The workers running now, each in a process group of its own: stopped with the emulator
# when the bench ends or is stopped (Ctrl-C, SIGTERM), and none started after that.
WORKERS: set[subprocess.Popen[str]] = set()
WORKERS_LOCK = threading.Lock()
STOPPING = threading.Event()


def stop_workers() -> None:
    """End every running worker's process group; no index starts another attempt."""
    STOPPING.set()
    with WORKERS_LOCK:
        running = list(WORKERS)
    for proc in running:
        kill_group(proc, timeout=5.0)  # type: ignore[arg-type]


def slow_ingest(ctx: Any) -> None:
    """The demo ingest plus a fixed sleep (``BENCH_CHUNK_SLEEP_S``): chunks that take a while."""
    process_chunk(ctx)
    time.sleep(float(os.environ.get("BENCH_CHUNK_SLEEP_S", "0.2")))


def _env(base: dict[str, str], table: str, layer: int, index: int, args: Any) -> dict[str, str]:
    l2 = tuple(s // c for s, c in zip(args.size, args.chunk, strict=True))
    return {
        **base,
        "PYTHONPATH": str(REPO),
        "PCG_GRAPH_ID": table,
        "PCG_LAYER": str(layer),
        "PCG_PERM_SEED": "7",
        "PCG_BATCH_SIZE": str(args.batch),
        "PCG_GRID_SHAPE": ",".join(map(str, layer_shape(l2, layer))),
        "PCG_STAGE": "ingest",
        "PCG_RUN_ID": table,
        "PCG_N_LAYERS": str(layer_count(l2)),
        "PCG_LOCK_EXPIRY_S": str(args.expiry),
        "BIGTABLE_PROJECT": PROJECT,
        "BIGTABLE_INSTANCE": INSTANCE,
        "PCG_DATASET_JSON": json.dumps(args.dataset),
        "JOB_COMPLETION_INDEX": str(index),
        "PCG_WORKLOAD": "bench.bench_kill_recovery:slow_ingest",
        "BENCH_CHUNK_SLEEP_S": str(args.chunk_sleep),
        "PCG_LOG_LEVEL": "DEBUG",  # a line per finished chunk: where the kills aim
    }


def _run_index(env: dict[str, str], kills: int, kill_after: int, stats: dict[str, Any]) -> None:
    """One Job index: attempts until one exits 0; the first ``kills`` are SIGKILLed.

    Per retry it records how long the retry waited for the dead attempt's claim (between
    its "held by another worker" and "claimed after waiting" lines; 0 when it took the claim
    over) and how long from the kill to its first finished chunk (start-up included)."""
    attempt, killed_at = 0, None
    while True:
        with WORKERS_LOCK:
            if STOPPING.is_set():
                return
            proc = subprocess.Popen(
                [sys.executable, "-m", "worker"],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # stop_workers() ends it and its children
            )
            WORKERS.add(proc)
        assert proc.stdout is not None
        done, held_at = 0, None
        for line in proc.stdout:
            now = time.monotonic()
            if "held by another worker; waiting" in line:
                held_at = now
            elif "claimed after waiting" in line and held_at is not None:
                stats["claim_wait_s"] += now - held_at
            if '"chunk ' in line and ' done"' in line:
                done += 1
                if killed_at is not None and done == 1:
                    stats["kill_to_progress_s"] += now - killed_at
                    killed_at = None
                if attempt < kills and done == kill_after:
                    # Mid-way through the next chunk's sleep: its claim is held for sure.
                    time.sleep(float(env["BENCH_CHUNK_SLEEP_S"]) / 2)
                    proc.send_signal(signal.SIGKILL)
                    killed_at = time.monotonic()
                    stats["kills"] += 1
                    break
        proc.stdout.close()
        code = proc.wait()
        with WORKERS_LOCK:
            WORKERS.discard(proc)
        if code == 0 or STOPPING.is_set():
            return
        attempt += 1
        stats["retries"] += 1
        if attempt > kills + 3:
            raise RuntimeError(f"index {env['JOB_COMPLETION_INDEX']} keeps failing")


def build(args: Any, base: dict[str, str], kills: int, takeover: bool) -> dict[str, Any]:
    """One demo build; returns wall time, kills and retries, and the oracle verdict."""
    table = f"bench-{int(time.time() * 1000) % 10**9}-{kills}-{int(takeover)}"
    client = open_bigtable_client(table, PROJECT, INSTANCE, _td(args.expiry), create=True)
    l2 = tuple(s // c for s, c in zip(args.size, args.chunk, strict=True))
    if (kills + 1) * args.kill_after > layer_batch_size(args.batch, 2):
        raise SystemExit("--kills x --kill-after must leave chunks for the last attempt")
    stats: dict[str, Any] = {
        "kills": 0,
        "retries": 0,
        "claim_wait_s": 0.0,
        "kill_to_progress_s": 0.0,
    }
    env = {**base, "PCG_CLAIM_TAKEOVER": "1" if takeover else "0"}
    t0 = time.monotonic()
    for layer in range(2, layer_count(l2) + 1):
        n = num_batches(layer_shape(l2, layer), layer_batch_size(args.batch, layer))
        threads = [
            threading.Thread(
                target=_run_index,
                args=(
                    _env(env, table, layer, i, args),
                    kills if layer == 2 and i == 0 else 0,
                    args.kill_after,
                    stats,
                ),
                daemon=True,
            )
            for i in range(n)
        ]  # daemons: a stopped bench does not wait for them (stop_workers ends the workers)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.monotonic() - t0
    result = compare(args.expected, observed_stats(read_all_nodes(client), layer_count(l2)))
    close_bigtable_client(client)
    rounded = {k: round(v, 1) if isinstance(v, float) else v for k, v in stats.items()}
    return {"wall_s": round(wall, 1), **rounded, "oracle_ok": result.ok}


def _td(seconds: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=3, help="SIGKILLs per build (distinct indexes)")
    p.add_argument("--expiry", type=float, default=20.0, help="lock expiry, seconds")
    p.add_argument("--size", type=int, nargs=3, default=[32, 32, 32])
    p.add_argument("--chunk", type=int, nargs=3, default=[8, 8, 8])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--chunk-sleep", type=float, default=0.2)
    p.add_argument("--kill-after", type=int, default=3, help="finished chunks before the kill")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-kill-"))
    vol = generate_volume(tuple(args.size), seed=3)
    save_volume(tmp / "volume.npy", vol)
    args.dataset = {
        "data_source": {"size": list(args.size), "watershed": str(tmp / "volume.npy")},
        "graph_config": {"CHUNK_SIZE": list(args.chunk), "SPATIAL_BITS": 10},
    }
    l2 = tuple(s // c for s, c in zip(args.size, args.chunk, strict=True))
    args.expected = expected_stats(vol, tuple(args.chunk), layer_count(l2))
    with EmulatorSet(["bigtable"]) as emus:
        base = {**os.environ, **emus.env}
        os.environ.update(emus.env)
        print(
            f"demo {args.size} / {args.chunk} chunks, batch {args.batch}, lock expiry "
            f"{args.expiry:g} s, {args.chunk_sleep:g} s per chunk, {args.kills} kills",
            flush=True,
        )
        try:
            none = build(args, base, 0, True)
            print(f"no kill                      : {none}", flush=True)
            after = build(args, base, args.kills, True)
            print(f"kills, takeover (now)        : {after}", flush=True)
            before = build(args, base, args.kills, False)
            print(f"kills, no takeover (before)  : {before}", flush=True)
        finally:
            stop_workers()
    for name, run in (("now", after), ("before", before)):
        k = max(run["kills"], 1)
        print(
            f"per kill ({name}): extra wall {(run['wall_s'] - none['wall_s']) / k:.1f} s, "
            f"claim wait {run['claim_wait_s'] / k:.1f} s, kill to the retry's first chunk "
            f"{run['kill_to_progress_s'] / k:.1f} s"
        )


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: stop the emulators and pods first
