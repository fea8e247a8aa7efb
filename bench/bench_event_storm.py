"""An event storm for one run: 1,000 Job events over a minute, several deliverers at once.

Against the Firestore emulator. A scripted cluster plays a running layer whose progress
moves with every event (each event announces one more completed index); events are fired at
random times over `--seconds` and delivered, like parallel function instances, by a pool of
`--deliverers` threads, each with its own store client and Controller. Two modes, measured
one after the other on fresh runs:

- `coalesce`: `Controller.on_job_event` (shared.ports.coalesce: covered events acknowledged, at
  most one reconcile per run in flight, events during it folded into one follow-up);
- `direct`: every event runs its own `Controller.reconcile`, as before coalescing.

Reports reconciles done, stale retries, events dropped as covered, events folded into a
running holder, the peak backlog (events waiting for a free deliverer), and the latency of the
last event's effect (from its firing until the stored layer shows its progress).

    python bench/bench_event_storm.py [--events 1000] [--seconds 60] [--deliverers 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from adapters.common.termination import run_script
from adapters.google.firestore_store import FirestoreRunStore
from adapters.local.emulators import EmulatorSet
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.control.job_events import JobEvent
from shared.control.reconciler import ReconcileResult
from shared.control.triggers import Reconciles
from shared.ports.cluster import JobStatus, PodInfo
from shared.ports.run_store import StaleStateError
from shared.reconcile.build_plan import new_run

ACTIVE = 200


class MovingLayer:
    """The cluster: one Job whose completed count is bumped by each fired event."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = 0
        self.name = ""
        self.completions = 0
        self.pods = [
            PodInfo(
                f"p{i}", uuid.uuid4().hex, "", i, "Running", 0.5, 1.0, created=datetime.now(UTC)
            )
            for i in range(ACTIVE)
        ]

    def bump(self) -> int:
        with self.lock:
            self.done += 1
            return self.done

    def validate_job(self, manifest):
        pass

    def create_job(self, manifest):
        self.name, self.completions = manifest["metadata"]["name"], manifest["spec"]["completions"]
        return True

    def get_job(self, name):
        with self.lock:
            done = self.done
        completed = f"0-{done - 1}" if done > 1 else ("0" if done else "")
        return JobStatus(
            self.name, {}, {}, self.completions, ACTIVE, False, ACTIVE, completed_indexes=completed
        )

    def list_pods(self, job_name, index=None, job_uid=""):
        return list(self.pods)

    def patch_job(self, name, *, parallelism=None, suspend=None):
        pass

    def delete_job(self, name, scope=None):
        pass

    def drain_job(self, name, scope=None):
        pass

    def pod_log(self, pod_name, tail_lines=100):
        return ""

    def job_events(self, job_name):
        return []


def storm(project: str, mode: str, args: argparse.Namespace) -> dict[str, float]:
    cfg = load_config(Path(__file__).resolve().parents[1] / "examples/demo/pipeline.yml")
    ramp = cfg.job.ramp.model_copy(update={"start": ACTIVE, "max": ACTIVE})
    cfg = cfg.model_copy(update={"job": cfg.job.model_copy(update={"batch_size": 1, "ramp": ramp})})
    run = new_run(
        cfg, f"storm-{mode}-{uuid.uuid4().hex[:6]}", ["ingest"], "auto", datetime.now(UTC)
    )
    run.setups.clear()  # the layers are measured; setup passes are not
    store = FirestoreRunStore(project)
    store.create_run(run)
    cluster = MovingLayer()
    Controller(store, cluster, lambda *a: None).reconcile(run.run_id)
    key = "ingest-L2"
    job_name = store.load_run(run.run_id).layers[key].job.name

    stats = {"reconciles": 0, "stale_retries": 0, "stale_errors": 0, "acked_no_work": 0}
    stats_lock = threading.Lock()
    local = threading.local()

    class CountedReconciler:
        """The controller's reconciler, counting its reconciles and their stale retries."""

        def __init__(self, inner: Reconciles) -> None:
            self.inner = inner

        def reconcile(self, run_id: str) -> ReconcileResult:
            result = self.inner.reconcile(run_id)
            with stats_lock:
                stats["reconciles"] += 1
                stats["stale_retries"] += result.stale_retries
            return result

    class CountedLeases(FirestoreRunStore):
        """The run store, counting the reconcile lease's verdicts."""

        def lease_for_event(self, *a, **kw):
            verdict, seen = super().lease_for_event(*a, **kw)
            with stats_lock:
                stats[verdict.value] = stats.get(verdict.value, 0) + 1
            return verdict, seen

    def controller() -> Controller:
        if not hasattr(local, "c"):  # one store client per deliverer, like one per instance
            local.c = Controller(
                CountedLeases(project),
                cluster,
                lambda *a: None,
                wrap_reconciler=CountedReconciler,
            )
        return local.c

    waiting = [0, 0]  # queued now, peak

    def deliver(event: JobEvent) -> None:
        with stats_lock:
            waiting[0] -= 1
        try:
            if mode == "direct":
                controller().reconcile(run.run_id)
            elif controller().on_job_event(event) is None:
                with stats_lock:
                    stats["acked_no_work"] += 1
        except StaleStateError:
            with stats_lock:
                stats["stale_errors"] += 1

    rng = random.Random(3)
    offsets = sorted(rng.uniform(0, args.seconds) for _ in range(args.events))
    start = time.monotonic()
    last_fire = 0.0
    with ThreadPoolExecutor(args.deliverers) as pool:
        for i, offset in enumerate(offsets):
            time.sleep(max(0.0, start + offset - time.monotonic()))
            target = cluster.bump()
            event = JobEvent(
                job_name=job_name,
                namespace="default",
                reason="SuccessfulCreate" if i % 7 else "Completed",
                message="",
                timestamp=datetime.now(UTC),
                insert_id=uuid.uuid4().hex,
            )
            last_fire = time.monotonic()
            with stats_lock:
                waiting[0] += 1
                waiting[1] = max(waiting[1], waiting[0])
            pool.submit(deliver, event)
        # latency of the last event's effect: until the stored layer shows its progress
        while store.load_run(run.run_id).layers[key].progress.count < target:
            if time.monotonic() - last_fire > 300:
                break
            time.sleep(0.05)
        effect_s = time.monotonic() - last_fire
    drained_s = time.monotonic() - last_fire
    return {
        "mode": mode,
        "events": args.events,
        "deliverers": args.deliverers,
        "reconciles": stats["reconciles"],
        "stale_retries": stats["stale_retries"] + 5 * stats["stale_errors"],
        "stale_errors": stats["stale_errors"],
        "events_acked_without_reconcile": stats["acked_no_work"],
        "events_marked_for_holder": stats.get("mark", 0),
        "events_dropped_covered": stats.get("covered", 0),
        "events_acquiring": stats.get("acquire", 0),
        "peak_backlog": waiting[1],
        "last_event_effect_s": round(effect_s, 2),
        "all_delivered_s": round(drained_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--deliverers", type=int, default=8)
    parser.add_argument("--modes", default="coalesce,direct")
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args()
    logging.getLogger("cave_pipeline").setLevel(logging.WARNING)
    with EmulatorSet(("firestore",)) as emus:
        os.environ.update(emus.env)
        project = f"storm-{uuid.uuid4().hex[:6]}"
        rows = [storm(project, mode, args) for mode in args.modes.split(",")]
    if not args.json:
        for row in rows:
            print(" ".join(f"{k}={v}" for k, v in row.items()))
    print(json.dumps({"event_storm": rows}))


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: stop the emulators and pods first
