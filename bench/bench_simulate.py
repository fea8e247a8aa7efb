"""The build simulator, at size and against reality.

1. Plan: a build of over a million layer-2 chunks (examples/scale: 102^3 chunks, ingest,
   l2cache and meshing, ramp to 2,000 Spot pods) from a per-chunk time; prints the time the
   simulation took, the build's wall time, cost and controller load.
2. Check: runs the demo on the local stack (`--demo-size`, ingest), then simulates the same
   config from the demo's own recorded runtimes (each layer's pods) with the local stack's
   behaviour (no node start-up, the demo's tick), and reports the error against the demo's
   measured wall time.

    python bench/bench_simulate.py [--chunk-seconds 20] [--demo-size 128] [--skip-demo]

The last line is JSON: {"plan": {...}, "demo": {measured_wall_s, simulated_wall_s, error}}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from scripts.commands.simulate import report_dict, run_simulation
from shared.config.config_files import load_config
from shared.forecast.simulation.cluster import ClusterParams
from shared.forecast.simulation.engine import SimSettings
from shared.forecast.simulation.runtimes import Runtimes, recorded_runtimes

ROOT = Path(__file__).resolve().parents[1]


def plan(chunk_seconds: float, preemptions: float) -> dict:
    cfg = load_config(ROOT / "examples" / "scale" / "pipeline.yml")
    settings = SimSettings(
        cluster=ClusterParams(preemptions_per_hour=preemptions),
        runtimes=Runtimes(chunk_seconds=chunk_seconds),
    )
    started = time.monotonic()
    report, _ = run_simulation(cfg, settings)
    out = report_dict(report, time.monotonic() - started, reconcile_s=0.5)
    out["layer2_chunks"] = next(lr["chunks"] for lr in out["layers"] if lr["layer"] == "ingest-L2")
    return out


def demo_check(size: int, timeout_s: float) -> dict:
    from scripts.demo_run import prepare_config, run_demo

    with tempfile.TemporaryDirectory(prefix="sim-demo-") as tmp:
        cfg = prepare_config(
            load_config(ROOT / "examples/demo/pipeline.yml"), Path(tmp), size, None
        )
        result = run_demo(cfg, Path(tmp), stages=["ingest"], advance="auto", timeout_s=timeout_s)
    recorded = recorded_runtimes(result.run)
    # The local stack: pods start as subprocesses on the spot (no node provisioning), events
    # reach the function in about a second.
    settings = SimSettings(
        cluster=ClusterParams(node_startup_s=0.0, warm_start_s=0.5),
        runtimes=Runtimes(recorded=recorded),
        sink_delay_s=1.0,
    )
    report, _ = run_simulation(cfg, settings, ["ingest"])
    measured = result.wall_s
    layers = {
        ls.key: round((ls.timing.finished_at - ls.timing.submitted_at).total_seconds(), 2)
        for ls in result.run.ordered_layers()
        if ls.timing.finished_at and ls.timing.submitted_at
    }
    return {
        "size": size,
        "ok": result.ok,
        "measured_wall_s": round(measured, 2),
        "simulated_wall_s": round(report.wall_s, 2),
        "error": round((report.wall_s - measured) / measured, 3),
        "measured_layers_s": layers,
        "simulated_layers_s": {lr.key: round(lr.wall_s, 2) for lr in report.layers},
        "recorded_mean_pod_s": {k: round(v[0], 2) for k, v in recorded.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunk-seconds", type=float, default=20.0)
    parser.add_argument("--preemptions-per-hour", type=float, default=0.05)
    parser.add_argument("--demo-size", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--skip-demo", action="store_true")
    args = parser.parse_args()
    out = {"plan": plan(args.chunk_seconds, args.preemptions_per_hour)}
    p = out["plan"]
    print(
        f"plan: {p['layer2_chunks']:,} layer-2 chunks ({p['chunks']:,} in all) simulated in "
        f"{p['simulated_in_s']} s: {p['wall_s'] / 3600:.2f} h, ${p['cost_usd']:,.2f}, "
        f"{p['pods']:,} pods, {p['function_invocations']:,} invocations, "
        f"{p['firestore_writes']:,} writes, {p['job_events']:,} Job events "
        f"({p['events_dropped']:,} dropped), "
        f"controller ${p['controller_cost']['monthly_usd']}/month"
    )
    if not args.skip_demo:
        out["demo"] = demo_check(args.demo_size, args.timeout)
        d = out["demo"]
        print(
            f"demo {d['size']}^3: measured {d['measured_wall_s']} s, simulated "
            f"{d['simulated_wall_s']} s, error {d['error']:+.1%}"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
