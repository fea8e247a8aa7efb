"""How fast the completeness check reads a layer's done markers and compares them with the grid.

For each size N: a layer-2 grid of about N chunks is marked done on the Bigtable emulator
(bulk mutations; a random 0.1 % of the chunks and one block of 100 left unmarked, plus a live
claim without a done marker on each of those, as killed workers leave them), then
- the check: `done_chunk_ids` (key-range scans, 16 shards, only the done cell returned) and
  `verify_layer` (the comparison with the grid, missing intervals);
- baseline 1, measured in the same run: the per-chunk read (`BigtableChunkLedger.is_done`, one
  request per chunk) on a sample, extrapolated to N;
- baseline 2: `BigtableChunkLedger.done_among` (row-key batches of 10,000), the read `pipeline start
  --from-layer` uses, on the whole layer.

    PYTHONPATH=$PWD python3 bench/bench_verify.py --sizes 100000,250000 [--sample 2000]

Prints one line per measurement (rows/s) and a JSON summary. Figures, not assertions; the
emulator is single-process Go on a shared machine, so absolute rates are far below Bigtable's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.bigtable.chunk_ledger import (  # noqa: E402
    BigtableChunkLedger,
    close_bigtable_client,
    open_bigtable_client,
)
from adapters.bigtable.ledger_scan import done_chunk_ids  # noqa: E402
from adapters.local.emulators import EmulatorSet  # noqa: E402
from shared.reconcile.completeness import LayerGrid, verify_layer  # noqa: E402
from tests.builders.done_rows import write_claims, write_done_markers  # noqa: E402

SHAPES = {100_000: (50, 50, 40), 250_000: (100, 50, 50), 1_000_000: (100, 100, 100)}


def _shape(n: int) -> tuple[int, int, int]:
    if n in SHAPES:
        return SHAPES[n]
    side = round(n ** (1 / 3))
    return (side, side, max(1, n // (side * side)))


def bench_size(
    client: Any, n: int, sample: int, rng: np.random.Generator, among: bool = True
) -> dict[str, Any]:
    grid = LayerGrid("ingest", 2, _shape(n), n_layers=9, spatial_bits=10)
    total = grid.chunks
    missing = set(rng.choice(total, size=max(1, total // 1000), replace=False).tolist())
    missing |= set(range(total // 2, total // 2 + 100))
    ids = [grid.chunk_id(p) for p in range(total)]
    marked = [c for p, c in enumerate(ids) if p not in missing]

    t0 = time.perf_counter()
    write_done_markers(client, marked)
    write_claims(client, [ids[p] for p in missing])
    write_s = time.perf_counter() - t0
    print(
        f"N={total}: wrote {len(marked)} done markers in {write_s:.1f}s "
        f"({len(marked) / write_s:,.0f} rows/s)",
        flush=True,
    )

    t0 = time.perf_counter()
    done = done_chunk_ids(client, "ingest")
    scan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    verdict = verify_layer(grid, done)
    compare_s = time.perf_counter() - t0
    assert verdict.chunks_missing == len(missing), (verdict.chunks_missing, len(missing))
    check_s = scan_s + compare_s
    print(
        f"N={total}: check (scan {scan_s:.2f}s + compare {compare_s:.3f}s) {check_s:.2f}s = "
        f"{total / check_s:,.0f} chunks/s; {verdict.chunks_missing} missing in "
        f"{verdict.missing_range_count} intervals",
        flush=True,
    )

    ledger = BigtableChunkLedger(client)
    picks = rng.choice(total, size=min(sample, total), replace=False).tolist()
    t0 = time.perf_counter()
    for p in picks:
        ledger.is_done(ids[p])
    per_chunk_s = (time.perf_counter() - t0) / len(picks)
    print(
        f"N={total}: baseline per-chunk is_done: {1 / per_chunk_s:,.0f} chunks/s on "
        f"{len(picks)} chunks, {per_chunk_s * total:.0f}s extrapolated",
        flush=True,
    )

    among_s = None
    if among:
        t0 = time.perf_counter()
        found = ledger.done_among(ids)
        among_s = time.perf_counter() - t0
        assert len(found) == len(marked)
        print(
            f"N={total}: baseline done_among (10k-key batches): {among_s:.2f}s = "
            f"{total / among_s:,.0f} chunks/s",
            flush=True,
        )
    return {
        "chunks": total,
        "missing": len(missing),
        "write_rows_per_s": round(len(marked) / write_s),
        "scan_s": round(scan_s, 3),
        "compare_s": round(compare_s, 4),
        "check_chunks_per_s": round(total / check_s),
        "per_chunk_is_done_per_s": round(1 / per_chunk_s),
        "per_chunk_extrapolated_s": round(per_chunk_s * total, 1),
        "done_among_s": None if among_s is None else round(among_s, 3),
        "speedup_vs_per_chunk": round(per_chunk_s * total / check_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,250000", help="Comma list of chunk counts.")
    parser.add_argument("--sample", type=int, default=2000, help="Chunks the baseline reads.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--no-done-among", action="store_true", help="Skip the batched key read (slow at 1M)."
    )
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    results = []
    with EmulatorSet(["bigtable"]) as emus:
        os.environ.update(emus.env)
        for i, n in enumerate(int(s) for s in args.sizes.split(",")):
            # A table per size: the scan reads the whole key space.
            client = open_bigtable_client(
                f"bench-verify-{i}", "bench", "bench", timedelta(minutes=1), create=True
            )
            try:
                results.append(bench_size(client, n, args.sample, rng, not args.no_done_among))
            finally:
                close_bigtable_client(client)
    print(json.dumps({"bench": "verify", "results": results}))


if __name__ == "__main__":
    main()
