"""Benchmark the demo's volume: how long `demo.volume.generate_volume` takes at the demo's
sizes, against a baseline measured in the same run (filling the same array with seeded random
labels, the least any generator must do). Replaces a timed assertion that was a test.

Run: ``python bench/bench_demo_volume.py [--sizes 64,128,256] [--repeat 3]``. Prints a table
and a final JSON line; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo.volume import generate_volume  # noqa: E402


def _seconds(fn, repeat: int) -> float:  # noqa: ANN001 - a thunk
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="64,128,256")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        shape = (size,) * 3
        gen = _seconds(lambda shape=shape: generate_volume(shape, seed=0), args.repeat)
        rng = np.random.default_rng(0)
        base = _seconds(
            lambda shape=shape, rng=rng: rng.integers(0, 2**31, size=shape, dtype=np.uint64),
            args.repeat,
        )
        rows.append({"size": size, "generate_s": round(gen, 4), "baseline_s": round(base, 4),
                     "ratio": round(gen / base, 1) if base else None})  # fmt: skip
    print(f"{'size':>6}{'generate s':>12}{'baseline s':>12}{'ratio':>8}")
    for r in rows:
        print(f"{r['size']:>6}{r['generate_s']:>12}{r['baseline_s']:>12}{r['ratio']:>8}")
    print(json.dumps({"volumes": rows}))


if __name__ == "__main__":
    main()
