"""What the setup passes cost a demo build on the local stack: per stage, the setup Job's
wall time (created to completed, as the controller saw it), the time from the setup's end to
the stage's layer 2 being created, and the whole run.

Runs the demo (ingest, l2cache, meshing; `--size`/`--chunk`) with `advance: auto`, so every
gap is the controller's. Prints a table and a final JSON line.

    python bench/bench_setup_pass.py [--size 32] [--chunk 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from scripts.demo_run import prepare_config, run_demo
from shared.config.config_files import load_config

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cfg = prepare_config(
            load_config(ROOT / "examples" / "demo" / "pipeline.yml"), work, args.size, args.chunk
        )
        result = run_demo(
            cfg, work, stages=["ingest", "l2cache", "meshing"], advance="auto", timeout_s=600
        )
    run = result.run
    rows = []
    for stage, setup in run.setups.items():
        first = run.layers[f"{stage}-L2"]
        rows.append(
            {
                "stage": stage,
                "phase": setup.phase,
                "setup_s": round((setup.finished_at - setup.started_at).total_seconds(), 2)
                if setup.finished_at and setup.started_at
                else None,
                "to_layer2_s": round(
                    (first.timing.submitted_at - setup.finished_at).total_seconds(), 2
                )
                if first.timing.submitted_at and setup.finished_at
                else None,
            }
        )
    total = (run.finished_at - run.created_at).total_seconds() if run.finished_at else None
    doc = {"ok": result.ok, "status": run.status, "run_s": total, "setups": rows}
    if not args.json:
        print(f"{'stage':<10} {'phase':<10} {'setup s':>8} {'to L2 s':>8}")
        for r in rows:
            print(f"{r['stage']:<10} {r['phase']:<10} {r['setup_s']!s:>8} {r['to_layer2_s']!s:>8}")
        print(f"run {run.status} in {total:.1f} s, oracle ok: {result.ok}")
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
