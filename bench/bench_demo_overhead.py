"""Where the demo's overhead went: the demo build run back to back in the same session under
the settings it had before and after each cut, each one's wall time, chunk compute and
timeline parts printed side by side, with the difference to the first (the baseline).

Variants (a name, then the changes against `examples/demo/pipeline.yml` and the stack):

- `before`: layer-2 batches of 32 chunks and the local Bigtable capacity of 200 requests a
  second (the settings before the cut: the ramp gate lowered parallelism to 1 at the
  demo's peak request rate);
- `capacity`: the batches of 32, the measured capacity (`PIPELINE_LOCAL_BIGTABLE_RPS`'s
  default, from bench/bench_bigtable_capacity.py);
- `after`: the template as it is and the measured capacity;
- `batch64`, `batch128`: the measured capacity and layer-2 batches of 64 or 128 chunks.

Each variant is one `pipeline demo --json` in a fresh work folder (`--size`, `--canary`
passed through), one at a time; the stack's start-up is reported apart (`stack_start_s`).

    python bench/bench_demo_overhead.py [--size 128] [--variants before,capacity,after]
        [--canary N] [--keep DIR]

Prints a table and a final JSON line. Figures of a shared 2-core machine: note the load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from adapters.common.termination import run_script

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "examples" / "demo" / "pipeline.yml"
PARTS = ("compute", "tail", "startup", "completion", "setup", "advance", "unnamed")


VARIANTS: dict[str, dict[str, Any]] = {
    "before": {"batch_size": 32, "capacity_rps": "200"},
    "capacity": {"batch_size": 32, "capacity_rps": None},
    "after": {"batch_size": None, "capacity_rps": None},
    "batch64": {"batch_size": 64, "capacity_rps": None},
    "batch128": {"batch_size": 128, "capacity_rps": None},
}


def variant_config(name: str, folder: Path) -> Path:
    """The demo template with variant `name`'s batch size, written in `folder` (its dataset
    path made absolute, since a config's relative paths are its folder's)."""
    raw = yaml.safe_load(TEMPLATE.read_text())
    raw["dataset"] = str(TEMPLATE.parent / raw["dataset"])
    batch = VARIANTS[name]["batch_size"]
    if batch is not None:
        raw["job"]["batch_size"] = batch
    path = folder / f"{name}.yml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def run_variant(
    name: str, folder: Path, size: int, canary: int | None, turn: int
) -> dict[str, Any]:
    """One demo under variant `name` (the `turn`-th of the bench: a variant may repeat); its
    `--json` summary."""
    config = variant_config(name, folder)
    env = dict(os.environ)
    env.pop("PIPELINE_LOCAL_BIGTABLE_RPS", None)
    if (rps := VARIANTS[name]["capacity_rps"]) is not None:
        env["PIPELINE_LOCAL_BIGTABLE_RPS"] = rps
    cmd = [sys.executable, "-m", "scripts.cli", "demo", "-c", str(config), "--json"]
    cmd += ["--size", str(size), "--workdir", str(folder / f"{turn}-{name}")]
    if canary:
        cmd += ["--canary", str(canary)]
    child = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = child.communicate()
    finally:
        if child.poll() is None:  # this bench stopped: the demo stops its stack on SIGTERM
            child.terminate()
            child.wait(timeout=120)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if child.returncode != 0 or not lines:
        raise SystemExit(f"{name}: demo exited {child.returncode}\n{err[-3000:]}")
    return json.loads(lines[-1])


def row(name: str, s: dict[str, Any]) -> dict[str, Any]:
    """The figures of one variant's summary."""
    t = s["timeline"]
    return {
        "variant": name,
        "ok": s["ok"],
        "wall_s": s["wall_s"],
        "chunk_compute_s": s["chunk_compute_s"],
        "ratio": round(s["wall_s"] / s["chunk_compute_s"], 2),
        "pods": s["pods"],
        "stack_start_s": t["stack_start_s"],
        "parts_s": {p: t["parts_s"].get(p, 0.0) for p in PARTS},
        "ramp_lowered": sum(1 for r in s["bigtable"]["ramp_timeline"] if "lowered" in r[2]),
        "cost_usd": s["cost_usd"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--variants", default="before,capacity,after")
    ap.add_argument("--canary", type=int, default=None)
    ap.add_argument("--keep", type=Path, default=None, help="keep the work folders here")
    args = ap.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; choose from {sorted(VARIANTS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for turn, name in enumerate(names):
            print(f"{name}: running the {args.size}^3 demo ...", flush=True)
            rows.append(row(name, run_variant(name, folder, args.size, args.canary, turn)))
    base = rows[0]
    print(
        f"\n{'variant':10}{'wall':>8}{'d wall':>8}{'compute':>9}{'ratio':>7}{'pods':>6}"
        + "".join(f"{p:>11}" for p in PARTS)
    )
    for r in rows:
        print(
            f"{r['variant']:10}{r['wall_s']:8.1f}{r['wall_s'] - base['wall_s']:+8.1f}"
            f"{r['chunk_compute_s']:9.1f}{r['ratio']:7.2f}{r['pods']:6}"
            + "".join(f"{r['parts_s'][p]:11.1f}" for p in PARTS)
        )
    print(json.dumps({"size": args.size, "load": os.getloadavg(), "rows": rows}))


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: the running demo is stopped first
