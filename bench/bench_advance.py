"""Advance latency on the local stack with GKE's event model: from a layer's last index
completing (its Job's completion time) to the next layer's Job being created.

The local stack runs Kubernetes' own Job controller, whose event recorder gives a Job's
events one token bucket of 25, one more per 5 minutes, and a log sink delay drawn from 5 to
60 s; ticks come
every `--tick` seconds (60, as Cloud Scheduler's job). The bottom layer has more than 25 pods
(one chunk per index), so its `Completed` event is dropped as on GKE. Two designs, measured
in the same process:

- `before`: Job events and ticks only (PIPELINE_WATCH_BUDGET_S=0);
- `after`: the tick function also watches layers about to finish (shared/control/advance_watch.py).

Workers run a chunk function that only sleeps `--chunk-s` seconds (62 by default: longer
than the sink's delay, as production chunks are, so the late `SuccessfulCreate` entries of
the last pods do not stand in for the lost `Completed`), so the figures are the
controller's, not the workload's. `--runs` runs per design are started `--stagger` seconds
apart (so layers end at every phase of the tick). Prints a table and a final JSON line.

    python bench/bench_advance.py [--runs 6] [--tick 60] [--chunk-s 62] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from adapters import wiring
from adapters.bigtable.chunk_ledger import ensure_table
from adapters.common.termination import run_script
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import PubSubBus
from adapters.local.stack import LocalStack
from shared.config.config_files import load_config
from shared.model.phase import RunStatus
from shared.model.state import RunState
from shared.reconcile.build_plan import new_run

ROOT = Path(__file__).resolve().parents[1]
GRID = 3  # chunks per axis at layer 2: 27 pods > the bucket's 25
STEPS: dict[int, list[dict[str, float]]] = {}  # lower layer's pods -> creating reconciles' steps


def bench_config(tick_s: float, parallelism: int):
    """The demo config on a 3^3 grid of sleeping chunks, one chunk per index (27 pods at
    layer 2, 8 at layer 3, 1 at layer 4) and a fixed parallelism (no ramp)."""
    cfg = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
    size = 16 * GRID
    ds = cfg.ds.model_copy(
        update={
            "data_source": cfg.ds.data_source.model_copy(update={"size": (size, size, size)}),
            "graph_config": cfg.ds.graph_config.model_copy(update={"CHUNK_SIZE": (16, 16, 16)}),
        }
    )
    ramp = cfg.job.ramp.model_copy(update={"start": parallelism, "max": parallelism})
    job = cfg.job.model_copy(update={"batch_size": 1, "ramp": ramp})
    controller = cfg.controller.model_copy(update={"tick_period_s": tick_s})
    return cfg.model_copy(
        update={
            "dataset_config": ds,
            "job": job,
            "controller": controller,
            "workloads": {"ingest": "tests.builders.plugins:slow"},
        }
    )


class CreatedBy(logging.Handler):
    """Which trigger's reconcile created each Job: the controller's `job created` line, then
    the same run's next `reconciled` line with actions (its `trigger`: tail-watch, tick,
    job-event, kick)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.pending: dict[str, list[str]] = {}  # run -> Jobs created, reconcile not logged
        self.trigger: dict[str, str] = {}  # Job name -> trigger
        self.reconcile_s: dict[str, float] = {}  # Job name -> its creating reconcile's seconds
        self.steps: dict[str, dict[str, float]] = {}  # Job name -> that reconcile's steps

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = json.loads(record.getMessage())
        except ValueError:
            return
        run = str(line.get("run", ""))
        if line.get("message") == "job created":
            self.pending.setdefault(run, []).append(str(line["job"]))
        elif line.get("message") == "reconciled" and line.get("actions"):
            for job in self.pending.pop(run, []):
                self.trigger[job] = str(line.get("trigger"))
                self.reconcile_s[job] = sum(line.get("step_s", {}).values())
                self.steps[job] = dict(line.get("step_s", {}))


def advances(
    state: RunState, stack: LocalStack, created_by: CreatedBy
) -> list[tuple[int, float, float, str, float]]:
    """(pods of the lower layer, seconds from its Job completing to the next Job's creation,
    seconds from its last pod finishing to its Job completing: the Job controller's part,
    the trigger whose reconcile created the next Job, and that reconcile's own seconds).
    Kubernetes' timestamps have one-second resolution."""
    assert stack.cluster is not None
    layers = sorted(state.layers.values(), key=lambda ls: ls.layer)
    out = []
    for lower, upper in zip(layers, layers[1:], strict=False):
        STEPS.setdefault(lower.job.completions, []).append(created_by.steps.get(upper.job.name, {}))
        done = stack.cluster.get_job(lower.job.name)
        created = stack.cluster.get_job(upper.job.name)
        if done and created and done.completion_time and created.created:
            seconds = (created.created - done.completion_time).total_seconds()
            finished = [p.finished for p in stack.cluster.list_pods(lower.job.name) if p.finished]
            job_part = (done.completion_time - max(finished)).total_seconds() if finished else 0.0
            trigger = created_by.trigger.get(upper.job.name, "?")
            own = created_by.reconcile_s.get(upper.job.name, 0.0)
            out.append((lower.job.completions, seconds, job_part, trigger, own))
    return out


def measure(
    design: str, runs: int, tick_s: float, stagger_s: float, parallelism: int, workdir: Path
) -> tuple[list[tuple[int, float, float, str, float]], int]:
    """Latencies of every advance of `runs` staggered runs; and the Job events the log sink
    published (the Job controller's recorder dropped the rest, as on GKE)."""
    cfg = bench_config(tick_s, parallelism)
    if design == "before":
        os.environ["PIPELINE_WATCH_BUDGET_S"] = "0"
    else:
        os.environ.pop("PIPELINE_WATCH_BUDGET_S", None)
    out: list[tuple[int, float, float, str, float]] = []
    created_by = CreatedBy()
    logging.getLogger("cave_pipeline").addHandler(created_by)
    stack = wiring.local_stack(
        cfg.project, workdir, tick_s, capacity_cpu=16.0, capacity_memory_gib=32.0
    )
    with stack:
        ensure_table(cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance)
        store, bus = FirestoreRunStore(cfg.project), PubSubBus(cfg.project)
        ids = []
        for i in range(runs):
            run = new_run(cfg, f"adv-{design}-{i}", ["ingest"], "auto", datetime.now(UTC))
            run.setups.clear()  # the layers are measured; setup passes are not
            store.create_run(run)
            bus.publish_json("kick", {"run_id": run.run_id, "action": "start"})
            ids.append(run.run_id)
            time.sleep(stagger_s)
        deadline = time.monotonic() + 600 + 10 * tick_s
        for run_id in ids:
            while (state := store.load_run(run_id)).status != RunStatus.SUCCEEDED:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{run_id} stuck: {state.status}")
                time.sleep(0.5)
            out += advances(state, stack, created_by)
        assert stack.log_sink is not None
        sent = stack.log_sink.sent
        bus.close()
    logging.getLogger("cave_pipeline").removeHandler(created_by)
    return out, sent


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 2),
        "p95_s": round(p95, 2),
        "max_s": round(max(values), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=6, help="runs per design")
    parser.add_argument("--tick", type=float, default=60.0, help="tick period (Cloud Scheduler)")
    parser.add_argument("--stagger", type=float, default=25.0, help="seconds between run starts")
    parser.add_argument("--parallelism", type=int, default=14)
    parser.add_argument("--chunk-s", type=float, default=62.0, help="seconds each chunk sleeps")
    parser.add_argument("--json", action="store_true", help="(the JSON line is always last)")
    parser.add_argument("--designs", default="before,after")
    args = parser.parse_args()
    os.environ["TEST_PLUGIN_SLEEP_S"] = str(args.chunk_s)  # the pods inherit it
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for design in args.designs.split(","):
            samples, sent = measure(
                design, args.runs, args.tick, args.stagger, args.parallelism, Path(tmp) / design
            )
            by_size = {
                str(size): {
                    **summary([a[1] for a in samples if a[0] == size]),
                    # last pod finished -> Job Complete: the Job controller's own part
                    "job_controller_median_s": statistics.median(
                        a[2] for a in samples if a[0] == size
                    ),
                    # the reconcile that created the next Job: its own seconds
                    "reconcile_median_s": round(
                        statistics.median(a[4] for a in samples if a[0] == size), 2
                    ),
                    # whose reconcile created the next Job, and how fast each was
                    "by_trigger": {
                        t: summary([a[1] for a in samples if a[0] == size and a[3] == t])
                        for t in sorted({a[3] for a in samples if a[0] == size})
                    },
                }
                for size in sorted({a[0] for a in samples}, reverse=True)
            }
            results[design] = {"by_pods": by_size, "events_published": sent}
    print(f"advance latency: lower layer's Job complete -> next Job created; tick {args.tick}s,")
    print(f"Kubernetes event recorder model on, log sink delay 5-60 s, chunks {args.chunk_s}s")
    print("(job ctl s: the lower layer's last pod finished -> its Job Complete, median;")
    print(" reconcile s: the median of the creating reconcile's own seconds)")
    print(
        f"{'design':<8}{'pods':>6}{'n':>4}{'median s':>10}{'p95 s':>8}{'max s':>8}"
        f"{'job ctl s':>11}{'reconcile s':>13}{'events':>9}"
    )
    for design, r in results.items():
        for pods, s in r["by_pods"].items():
            print(
                f"{design:<8}{pods:>6}{s['n']:>4}{s['median_s']:>10}{s['p95_s']:>8}"
                f"{s['max_s']:>8}{s['job_controller_median_s']:>11}"
                f"{s['reconcile_median_s']:>13}{r['events_published']:>9}"
            )
            for trigger, t in s["by_trigger"].items():
                print(f"{'':<8}{'':>6}{t['n']:>4}{t['median_s']:>10}{t['p95_s']:>8}"
                      f"{t['max_s']:>8}  created by a {trigger} reconcile")  # fmt: skip
    for pods, steps in sorted(STEPS.items(), reverse=True):
        medians = {
            k: round(statistics.median(st.get(k, 0.0) for st in steps), 2)
            for k in ("observe", "decide", "commit", "act")
        }
        print(f"after a {pods}-pod layer, the creating reconcile's steps (median s): {medians}")
    big = str(GRID**3)
    final = results.get("after") or next(iter(results.values()))
    line = {
        "event_model": "kubernetes",
        "tick_s": args.tick,
        "chunk_s": args.chunk_s,
        "parallelism": args.parallelism,
        "sink_delay_s": [5, 60],
        "realistic_pods_per_layer": GRID**3,
        "realistic_median_s": final["by_pods"][big]["median_s"],
        "realistic_p95_s": final["by_pods"][big]["p95_s"],
        **results,
    }
    print(json.dumps(line))


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: stop the emulators and pods first
