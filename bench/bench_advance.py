"""Advance latency on the local stack: from the moment a layer may start (the layer below is
complete and, in approve mode, its flag is set) to the creation of its Job.

Two modes, measured in the same run: with Job events delivered to the controller (the
log-sink path), and with ticks alone (no job-events function). Workers run a no-op chunk
function so the figures are the controller's, not the workload's. The predecessor polled
every 30 s. Prints a table and a final JSON line.

    python bench/bench_advance.py [--runs 2] [--tick 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from shared.adapters.bigtable.chunk_ledger import ensure_table
from shared.adapters.google.firestore_store import FirestoreRunStore
from shared.adapters.google.pubsub_bus import PubSubBus
from shared.adapters.local.stack import LocalStack
from shared.build_plan import new_run
from shared.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def bench_config(tick_s: float):
    """The demo config on a 16^3 grid of no-op chunks (layers 2..6: four advances a run)."""
    cfg = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
    ds = cfg.ds.model_copy(
        update={
            "data_source": cfg.ds.data_source.model_copy(update={"size": (64, 64, 64)}),
            "graph_config": cfg.ds.graph_config.model_copy(update={"CHUNK_SIZE": (4, 4, 4)}),
        }
    )
    job = cfg.job.model_copy(update={"batch_size": 4096})
    controller = cfg.controller.model_copy(update={"tick_period_s": tick_s})
    return cfg.model_copy(
        update={
            "dataset_config": ds,
            "job": job,
            "controller": controller,
            "workloads": {"ingest": "tests.builders.plugins:ok"},
        }
    )


def latencies(job_events: bool, runs: int, tick_s: float, workdir: Path) -> list[float]:
    cfg = bench_config(tick_s)
    out: list[float] = []
    with LocalStack(cfg.project, workdir, tick_s, job_events=job_events) as stack:
        ensure_table(cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance)
        store, bus = FirestoreRunStore(cfg.project), PubSubBus(cfg.project)
        for i in range(runs):
            run = new_run(cfg, f"adv-{job_events}-{i}", ["ingest"], "auto", datetime.now(UTC))
            store.create_run(run)
            bus.publish_json("kick", {"run_id": run.run_id, "action": "start"})
            deadline = time.monotonic() + 600
            while (state := store.load_run(run.run_id)).status != "succeeded":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{run.run_id} stuck: {state.status}")
                time.sleep(0.5)
            out += [
                (ls.submitted_at - ls.eligible_at).total_seconds()
                for ls in state.layers.values()
                if ls.layer > 2
            ]
        bus.close()
        assert stack.dispatcher is not None
    return out


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 3),
        "p95_s": round(p95, 3),
        "max_s": round(max(values), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--tick", type=float, default=5.0)
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        events = summary(latencies(True, args.runs, args.tick, Path(tmp) / "ev"))
        ticks = summary(latencies(False, args.runs, args.tick, Path(tmp) / "tk"))
    print(f"advance latency (layer below complete -> next Job created), tick {args.tick}s")
    print(f"{'mode':<14}{'n':>4}{'median s':>10}{'p95 s':>8}{'max s':>8}")
    for name, s in (("job events", events), ("ticks only", ticks)):
        print(f"{name:<14}{s['n']:>4}{s['median_s']:>10}{s['p95_s']:>8}{s['max_s']:>8}")
    print(
        f"ticks-only p95 / tick period: {ticks['p95_s'] / args.tick:.2f}; "
        f"predecessor polled every 30 s"
    )
    print(json.dumps({"tick_s": args.tick, "events": events, "ticks_only": ticks}))


if __name__ == "__main__":
    main()
