"""Reconcile cost per call: Firestore documents read and written, and cluster calls, for a
running layer of 1,000 vs 100,000 batches with 1,000 active pods (the goal: constant in the
number of batches; pod records batched).

Runs against the real Firestore emulator; the cluster is a scripted fake that plays a layer
in progress: each step 200 of the 1,000 running pods finish and are replaced, and the Job
keeps at most 1,000 finished pods (GKE's terminated-pod garbage collection). Counts are taken
at the client library boundary (each document a `get` or a query returns, each write in a
batch). Prints a table and a final JSON line.

    python bench/bench_reconcile.py
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from google.cloud.firestore_v1 import base_batch, collection, document, query

from shared import intervals
from shared.adapters.google.firestore_store import FirestoreRunStore
from shared.adapters.local.emulators import EmulatorSet
from shared.build_plan import new_run
from shared.cluster import JobStatus, PodInfo
from shared.config import load_config
from shared.controller import Controller

COUNTS: Counter[str] = Counter()
ACTIVE, FINISH_PER_STEP, GC_KEEP, STEPS = 1000, 200, 1000, 6
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def instrument() -> None:
    """Count document reads and writes where the client library does them."""
    get, cstream, qstream = (
        document.DocumentReference.get,
        collection.CollectionReference.stream,
        query.Query.stream,
    )  # noqa: E501

    def counted_get(self, *a, **kw):
        COUNTS["fs_reads"] += 1
        return get(self, *a, **kw)

    def counting(stream):
        def wrapper(self, *a, **kw):
            for snap in stream(self, *a, **kw):
                COUNTS["fs_reads"] += 1
                yield snap

        return wrapper

    document.DocumentReference.get = counted_get
    collection.CollectionReference.stream = counting(cstream)
    query.Query.stream = counting(qstream)
    for name in ("set", "update", "create", "delete"):
        original = getattr(base_batch.BaseBatch, name)

        def write(self, *a, _orig=original, **kw):
            COUNTS["fs_writes"] += 1
            return _orig(self, *a, **kw)

        setattr(base_batch.BaseBatch, name, write)


class LayerInProgress:
    """A fake cluster playing one big layer: the Job plus its pods, advanced by step()."""

    def __init__(self) -> None:
        self.job: JobStatus | None = None
        self.pods: list[PodInfo] = []
        self.done = 0
        self.next_index = 0
        self.clock = T0

    def _pod(self, index: int) -> PodInfo:
        return PodInfo(
            name=f"p-{index}",
            uid=uuid.uuid4().hex,
            job_name=self.job.name,
            index=index,
            phase="Running",
            cpu_request=0.5,
            memory_request_gib=1.0,
            created=self.clock,
            started=self.clock,
        )

    def step(self) -> None:
        """FINISH_PER_STEP running pods succeed and are replaced; old pods are GC'd."""
        self.clock += timedelta(seconds=60)
        running = [p for p in self.pods if p.phase == "Running"]
        for p in running[:FINISH_PER_STEP]:
            self.pods[self.pods.index(p)] = replace(
                p, phase="Succeeded", finished=self.clock, exit_code=0
            )
            self.done += 1
        self.pods += [self._new() for _ in range(FINISH_PER_STEP)]
        finished = [p for p in self.pods if p.phase != "Running"]
        gone = {p.uid for p in finished[: max(0, len(finished) - GC_KEEP)]}
        self.pods = [p for p in self.pods if p.uid not in gone]
        self.job = replace(
            self.job, completed_indexes=intervals.format(range(self.done)), active=ACTIVE
        )

    def _new(self) -> PodInfo:
        self.next_index += 1
        return self._pod(self.next_index)

    # ---- the Cluster interface, counted ----
    def validate_job(self, manifest):
        COUNTS["cluster_calls"] += 1

    def create_job(self, manifest):
        COUNTS["cluster_calls"] += 1
        spec = manifest["spec"]
        self.job = JobStatus(
            name=manifest["metadata"]["name"],
            labels={},
            annotations={},
            completions=spec["completions"],
            parallelism=ACTIVE,
            suspended=False,
            active=ACTIVE,
        )
        self.pods = [self._new() for _ in range(ACTIVE)]
        return True

    def get_job(self, name):
        COUNTS["cluster_calls"] += 1
        return self.job if self.job and self.job.name == name else None

    def list_pods(self, job_name, index=None):
        # GKE pages list calls at 500 pods: count the pages.
        COUNTS["cluster_calls"] += max(1, -(-len(self.pods) // 500))
        return list(self.pods)

    def patch_job(self, name, *, parallelism=None, suspend=None):
        COUNTS["cluster_calls"] += 1

    def delete_job(self, name):
        COUNTS["cluster_calls"] += 1

    def pod_log(self, pod_name, tail_lines=100):
        return ""

    def job_events(self, job_name):
        return []


def measure(store: FirestoreRunStore, grid: int) -> dict[str, float]:
    cfg = load_config(Path(__file__).resolve().parents[1] / "examples/demo/pipeline.yml")
    ds = cfg.ds.model_copy(
        update={"data_source": cfg.ds.data_source.model_copy(update={"size": (grid * 16,) * 3})}
    )
    job = cfg.job.model_copy(
        update={
            "batch_size": 1,
            "ramp": cfg.job.ramp.model_copy(update={"start": ACTIVE, "max": ACTIVE}),
        }
    )
    cfg = cfg.model_copy(update={"dataset_config": ds, "job": job})
    run = new_run(cfg, f"bench-{grid}-{uuid.uuid4().hex[:6]}", ["ingest"], "auto", T0)
    store.create_run(run)
    cluster = LayerInProgress()
    controller = Controller(store, cluster, lambda *a: None, clock=lambda: cluster.clock)
    controller.reconcile(run.run_id)  # creates the layer-2 Job
    batches = store.load_run(run.run_id).layers["ingest-L2"].completions
    per_call: list[Counter[str]] = []
    for _ in range(STEPS):
        cluster.step()
        COUNTS.clear()
        controller.reconcile(run.run_id)
        per_call.append(Counter(COUNTS))
    mean = {
        k: sum(c[k] for c in per_call) / STEPS for k in ("fs_reads", "fs_writes", "cluster_calls")
    }
    layers = len(store.load_run(run.run_id).layers)
    recorded = len(store.pod_records(run.run_id, "ingest-L2"))
    return {"batches": batches, "layers": layers, "pod_records": recorded, **mean}


def main() -> None:
    instrument()
    with EmulatorSet(("firestore",)) as emus:
        import os

        os.environ.update(emus.env)
        store = FirestoreRunStore(f"bench-{uuid.uuid4().hex[:6]}")
        rows = [measure(store, grid) for grid in (10, 47)]  # 1,000 and 103,823 batches
    print(
        f"per reconcile, {ACTIVE} active pods, {FINISH_PER_STEP} finishing per step "
        f"(mean of {STEPS} reconciles)"
    )
    print(f"{'batches':>8} {'layers':>6} {'fs reads':>9} {'fs writes':>9} {'cluster':>8}")
    for r in rows:
        print(
            f"{r['batches']:>8} {r['layers']:>6} {r['fs_reads']:>9.1f} {r['fs_writes']:>9.1f} "
            f"{r['cluster_calls']:>8.1f}"
        )
    print(json.dumps({"reconcile_io": rows}))


if __name__ == "__main__":
    main()
