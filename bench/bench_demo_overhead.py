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
- `batch64`, `batch128`: the measured capacity and layer-2 batches of 64 or 128 chunks;
- `nowatch`: the template as it is with the tick's tail watch off (`PIPELINE_WATCH_BUDGET_S=0`:
  a layer whose Job events were dropped waits for the next tick, as before the watch covered
  the demo's 5 s ticks);
- `floor`: the template as it is with a workload that does nothing (`demo.noop`): the wall
  time of the layers' Jobs, pods and ledger alone, what no cut of the compute can go under
  (its oracle fails, as it must; it is not counted as a failure here).

`--tree NAME=DIR` adds a variant NAME: the template as it is, run by the checkout in DIR (its
own code, this tree's control plane binary), to measure code before and after a change in
the same session (e.g. `git worktree add /tmp/before <commit>`).

Each variant is one `pipeline demo --json` in a fresh work folder (`--size`, `--canary`
passed through), one at a time; the stack's start-up is reported apart (`stack_start_s`).

    python bench/bench_demo_overhead.py [--size 128] [--variants before,capacity,after]
        [--tree NAME=DIR ...] [--canary N] [--keep DIR]

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
PARTS = (
    "compute",
    "tail",
    "process_start",
    "startup",
    "completion",
    "setup",
    "advance",
    "unnamed",
)


VARIANTS: dict[str, dict[str, Any]] = {
    "before": {"batch_size": 32, "capacity_rps": "200"},
    "capacity": {"batch_size": 32, "capacity_rps": None},
    "after": {"batch_size": None, "capacity_rps": None},
    "batch64": {"batch_size": 64, "capacity_rps": None},
    "batch128": {"batch_size": 128, "capacity_rps": None},
    "nowatch": {"batch_size": None, "capacity_rps": None, "env": {"PIPELINE_WATCH_BUDGET_S": "0"}},
    "floor": {"batch_size": None, "capacity_rps": None, "workload": "demo.noop:process_chunk"},
}
CONTROLPLANE = ROOT / ".controlplane"  # every tree runs this tree's binary (same version)


def variant_config(name: str, folder: Path) -> Path:
    """The demo template with variant `name`'s batch size, written in `folder` (its dataset
    path made absolute, since a config's relative paths are its folder's)."""
    raw = yaml.safe_load(TEMPLATE.read_text())
    raw["dataset"] = str(TEMPLATE.parent / raw["dataset"])
    batch = VARIANTS.get(name, {}).get("batch_size")
    if batch is not None:
        raw["job"]["batch_size"] = batch
    if (workload := VARIANTS.get(name, {}).get("workload")) is not None:
        raw["workloads"]["ingest"] = workload
    path = folder / f"{name}.yml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def run_variant(
    name: str, folder: Path, size: int, canary: int | None, turn: int, tree: Path = ROOT
) -> dict[str, Any]:
    """One demo under variant `name` (the `turn`-th of the bench: a variant may repeat), run
    by the checkout `tree`; its `--json` summary."""
    config = variant_config(name, folder)
    settings = VARIANTS.get(name, {})
    env = {**os.environ, "PYTHONPATH": str(tree), "CAVE_CONTROLPLANE_DIR": str(CONTROLPLANE)}
    for var in ("PIPELINE_LOCAL_BIGTABLE_RPS", "PIPELINE_WATCH_BUDGET_S"):
        env.pop(var, None)
    if (rps := settings.get("capacity_rps")) is not None:
        env["PIPELINE_LOCAL_BIGTABLE_RPS"] = rps
    env.update(settings.get("env", {}))
    cmd = [sys.executable, "-m", "scripts.cli", "demo", "-c", str(config), "--json"]
    cmd += ["--size", str(size), "--workdir", str(folder / f"{turn}-{name}")]
    if canary:
        cmd += ["--canary", str(canary)]
    child = subprocess.Popen(
        cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = child.communicate()
    finally:
        if child.poll() is None:  # this bench stopped: the demo stops its stack on SIGTERM
            child.terminate()
            child.wait(timeout=120)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    failed_oracle_only = name == "floor" and child.returncode == 1 and lines
    if (child.returncode != 0 and not failed_oracle_only) or not lines:
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
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a variant NAME: the template as it is, run by the checkout in DIR",
    )
    args = ap.parse_args()
    trees = {}
    for spec in args.tree:
        name, _, where = spec.partition("=")
        if not name or not (Path(where) / "scripts" / "cli.py").is_file():
            raise SystemExit(f"--tree {spec!r}: give NAME=DIR, DIR a checkout of this project")
        if name in VARIANTS:
            raise SystemExit(f"--tree {spec!r}: {name!r} names a variant of settings: rename it")
        trees[name] = Path(where).resolve()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS and n not in trees]
    if unknown:
        known = sorted(VARIANTS) + sorted(trees)
        raise SystemExit(f"--variants: unknown {unknown}; choose from {known} (or --tree)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for turn, name in enumerate(names):
            print(f"{name}: running the {args.size}^3 demo ...", flush=True)
            tree = trees.get(name, ROOT)
            summary = run_variant(name, folder, args.size, args.canary, turn, tree)
            rows.append(row(name, summary))
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
