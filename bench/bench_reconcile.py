"""One reconcile at full size: wall time, peak memory, Firestore reads/writes, cluster calls.

A running layer of `--batches` batches (default 100,000) with `--pods` active pods (default
5,000), against the real Firestore emulator. The cluster is a scripted fake that plays the
layer in progress: each step a fifth of the running pods finish and are replaced (a few fail),
the Job keeps at most `--pods` finished pods (GKE's terminated-pod garbage collection), and
the Job's completed-index set is heavily fragmented (a random half of the layer done before
the first step, so `completedIndexes` holds tens of thousands of intervals). Counts are taken
at the client library boundary (each document a `get` or a query returns, each write in a
batch); time is the wall time of `Controller.reconcile`; memory is the process's peak RSS.

    python bench/bench_reconcile.py --pods 5000 --json
    python bench/bench_reconcile.py --pods 1000 --batches 1000 --profile

The last line is JSON: pods, batches, reconcile_median_s, peak_rss_mib, firestore_reads,
firestore_writes, cluster_calls (reads/writes/calls are per reconcile, mean over the steps).

`--decode` measures instead what the GKE adapter spends reading a running layer once per
reconcile (its Job, then its pods in pages of 500) from hand-written Autopilot JSON
(tests/fixtures/gke_api, multiplied to 1,000 and 5,000 pods; no emulator): CPU-seconds and
peak Python memory, before (the client's model classes, then `sanitize_for_serialization`,
as the adapter read lists until it took the JSON) and after (`GkeCluster` as it is), both
in the same run through the same transport stand-in:

    python bench/bench_reconcile.py --decode --decode-pods 1000,5000

`--kube` measures the same reconcile against local Kubernetes instead of the scripted fake:
the real API server, Job controller and scheduler, with the process kubelet's hollow nodes
(pods get status, no process, as kwok's) holding `--pods` running pods of a real Indexed Job,
read by the controller through the GKE adapter (the `kubernetes` client) as on GKE. The
controller manager and the scheduler get `--api-qps` (default 200) so that 5,000 pods are
created and bound in minutes rather than Kubernetes' default 20 requests/s:

    python bench/bench_reconcile.py --kube --pods 5000 --batches 20000
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import resource
import statistics
import sys
import time
import tracemalloc
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from google.cloud.firestore_v1 import base_batch, collection, document, query

from adapters.common.termination import run_script
from adapters.google.firestore_store import FirestoreRunStore
from adapters.local.emulators import EmulatorSet
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.ports.cluster import JobStatus, PodInfo
from shared.reconcile.build_plan import new_run

COUNTS: Counter[str] = Counter()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
FAILS_PER_STEP = 3


def instrument() -> None:
    """Count document reads and writes where the client library does them."""
    get = document.DocumentReference.get
    cstream, qstream = collection.CollectionReference.stream, query.Query.stream

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


def index_string(mask: np.ndarray) -> str:
    """Kubernetes' interval form of a boolean mask (fast, for the fake's own bookkeeping)."""
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    starts, ends = edges[0::2], edges[1::2] - 1
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in zip(starts, ends, strict=True))


class LayerInProgress:
    """A fake cluster playing one big layer: the Job plus its pods, advanced by step()."""

    def __init__(self, active: int, finish_per_step: int, seed: int = 7) -> None:
        self.active, self.finish_per_step = active, finish_per_step
        self.rng = random.Random(seed)
        self.job: JobStatus | None = None
        self.pods: list[PodInfo] = []
        self.clock = T0
        self.done: np.ndarray = np.zeros(0, bool)
        self.failed: np.ndarray = np.zeros(0, bool)
        self.pending: list[int] = []

    def _pod(self, index: int) -> PodInfo:
        return PodInfo(
            name=f"p-{index}-{uuid.uuid4().hex[:5]}",
            uid=uuid.uuid4().hex,
            job_name=self.job.name,
            index=index,
            phase="Running",
            cpu_request=0.5,
            memory_request_gib=1.0,
            created=self.clock,
            started=self.clock,
        )

    def _new(self) -> PodInfo:
        return self._pod(self.pending.pop())

    def step(self) -> None:
        """finish_per_step running pods end (a few fail) and are replaced; old pods GC'd."""
        self.clock += timedelta(seconds=60)
        running = [i for i, p in enumerate(self.pods) if p.phase == "Running"]
        for n, i in enumerate(self.rng.sample(running, self.finish_per_step)):
            p = self.pods[i]
            ok = n >= FAILS_PER_STEP
            phase, code = ("Succeeded", 0) if ok else ("Failed", 42)
            self.pods[i] = replace(p, phase=phase, finished=self.clock, exit_code=code)
            (self.done if ok else self.failed)[p.index] = True
        self.pods += [self._new() for _ in range(self.finish_per_step)]
        finished = [p for p in self.pods if p.phase != "Running"]
        gone = {p.uid for p in finished[: max(0, len(finished) - self.active)]}
        self.pods = [p for p in self.pods if p.uid not in gone]
        self.job = replace(
            self.job,
            completed_indexes=index_string(self.done),
            failed_indexes=index_string(self.failed),
            active=self.active,
        )

    # ---- the Cluster interface, counted ----
    def validate_job(self, manifest):
        COUNTS["cluster_calls"] += 1

    def create_job(self, manifest):
        COUNTS["cluster_calls"] += 1
        spec = manifest["spec"]
        n = spec["completions"]
        # A random half of the layer is done already (less if the pods need the room): a
        # fragmented completedIndexes.
        room = self.active + 10 * self.finish_per_step
        self.done = np.random.default_rng(1).random(n) < max(0.0, min(0.5, 1 - room / n))
        self.failed = np.zeros(n, bool)
        self.pending = [int(i) for i in np.flatnonzero(~self.done)]
        self.rng.shuffle(self.pending)
        self.job = JobStatus(
            name=manifest["metadata"]["name"],
            labels={},
            annotations={},
            completions=n,
            parallelism=self.active,
            suspended=False,
            active=self.active,
        )
        self.pods = [self._new() for _ in range(self.active)]
        return True

    def get_job(self, name):
        COUNTS["cluster_calls"] += 1
        return self.job if self.job and self.job.name == name else None

    def list_pods(self, job_name, index=None, job_uid=""):
        pods = self.pods if index is None else [p for p in self.pods if p.index == index]
        # GKE pages list calls at 500 pods: count the pages.
        COUNTS["cluster_calls"] += max(1, -(-len(pods) // 500))
        return list(pods)

    def patch_job(self, name, *, parallelism=None, suspend=None):
        COUNTS["cluster_calls"] += 1

    def delete_job(self, name, scope=None):
        COUNTS["cluster_calls"] += 1

    def drain_job(self, name, scope=None):
        COUNTS["cluster_calls"] += 1

    def pod_log(self, pod_name, tail_lines=100):
        COUNTS["cluster_calls"] += 1
        return "Traceback ...\nRuntimeError: fatal chunk"

    def job_events(self, job_name):
        return []


class CountingCluster:
    """The GKE adapter, its calls counted at the port (a list of pods: one call a page)."""

    def __init__(self, cluster) -> None:
        self._cluster = cluster

    def __getattr__(self, name: str):
        attr = getattr(self._cluster, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            result = attr(*args, **kwargs)
            pages = -(-len(result) // 500) if name == "list_pods" else 1
            COUNTS["cluster_calls"] += max(1, pages)
            return result

        return call


def bench_config(pods: int, batches: int):
    """The demo config with batch size 1 on a grid of at least `batches` chunks."""
    cfg = load_config(Path(__file__).resolve().parents[1] / "examples/demo/pipeline.yml")
    side = max(2, round(batches ** (1 / 3)))
    while side**3 < batches:
        side += 1
    chunk = cfg.ds.graph_config.CHUNK_SIZE[0]
    ds = cfg.ds.model_copy(
        update={"data_source": cfg.ds.data_source.model_copy(update={"size": (side * chunk,) * 3})}
    )
    ramp = cfg.job.ramp.model_copy(update={"start": pods, "max": pods})
    job = cfg.job.model_copy(update={"batch_size": 1, "ramp": ramp})
    return cfg.model_copy(update={"dataset_config": ds, "job": job})


def measure(store: FirestoreRunStore, args: argparse.Namespace) -> dict[str, float]:
    cfg = bench_config(args.pods, args.batches)
    run = new_run(cfg, f"bench-{uuid.uuid4().hex[:6]}", ["ingest"], "auto", T0)
    run.setups.clear()  # the layers are measured; setup passes are not
    store.create_run(run)
    cluster = LayerInProgress(args.pods, max(FAILS_PER_STEP + 1, args.pods // 5))
    controller = Controller(store, cluster, lambda *a: None, clock=lambda: cluster.clock)
    controller.reconcile(run.run_id)  # creates the layer-2 Job
    batches = store.load_run(run.run_id).layers["ingest-L2"].job.completions
    per_call: list[Counter[str]] = []
    times: list[float] = []
    profiler = cProfile.Profile() if args.profile else None
    for _ in range(args.steps):
        cluster.step()
        COUNTS.clear()
        t = time.perf_counter()
        if profiler:
            profiler.enable()
        controller.reconcile(run.run_id)
        if profiler:
            profiler.disable()
        times.append(time.perf_counter() - t)
        per_call.append(Counter(COUNTS))
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    layer = store.load_run(run.run_id).layers["ingest-L2"]
    return {
        "pods": args.pods,
        "batches": batches,
        "completed_intervals": layer.progress.completed_indexes.count(",") + 1,
        **reconcile_figures(times, per_call),
        "pods_finished_per_step": cluster.finish_per_step,
    }


def reconcile_figures(times: list[float], per_call: list[Counter[str]]) -> dict[str, float]:
    """Wall time (median, max) of the measured reconciles, the process's peak memory, and
    the reads, writes and cluster calls per reconcile (mean)."""
    mean = {
        k: sum(c[k] for c in per_call) / len(per_call)
        for k in ("fs_reads", "fs_writes", "cluster_calls")
    }
    return {
        "reconcile_median_s": round(statistics.median(times), 3),
        "reconcile_max_s": round(max(times), 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "firestore_reads": mean["fs_reads"],
        "firestore_writes": mean["fs_writes"],
        "cluster_calls": mean["cluster_calls"],
    }


def measure_kube(store: FirestoreRunStore, args: argparse.Namespace) -> dict[str, float]:
    """One reconcile of a layer of `args.pods` running hollow pods in local Kubernetes."""
    import tempfile

    from adapters.gke.cluster import GkeCluster
    from adapters.local.kubelet.kubelet import Hollow
    from adapters.local.kubelet.node import NodeSpec
    from adapters.local.kubernetes import LocalKubernetes

    per_node = 100
    nodes = [
        NodeSpec(f"gk3-hollow-{i}", cpu=64.0, memory_gib=256.0, pods=per_node + 10)
        for i in range(-(-args.pods // per_node))
    ]
    cfg = bench_config(args.pods, args.batches)
    with tempfile.TemporaryDirectory(prefix="bench-kube-") as tmp:
        t0 = time.monotonic()
        kube = LocalKubernetes(
            Path(tmp), nodes=nodes, hollow=Hollow(run_s=args.run_s), api_qps=args.api_qps
        )
        with kube:
            gke = GkeCluster.from_kubeconfig(
                namespace=kube.namespace, config_file=str(kube.controller_kubeconfig)
            )
            cluster = CountingCluster(gke)
            run_id, now = f"bench-{uuid.uuid4().hex[:6]}", datetime.now(UTC)
            run = new_run(cfg, run_id, ["ingest"], "auto", now)
            run.setups.clear()  # the layers are measured; setup passes are not
            store.create_run(run)
            controller = Controller(store, cluster, lambda *a: None)
            controller.reconcile(run.run_id)  # creates the layer-2 Job
            layer = store.load_run(run.run_id).layers["ingest-L2"]
            started = time.monotonic()
            running = 0
            while running < args.pods:
                time.sleep(5.0)
                running = sum(p.phase == "Running" for p in gke.list_pods(layer.job.name))
                print(f"  {running} of {args.pods} pods running", file=sys.stderr, flush=True)
                if time.monotonic() - started > args.fill_timeout_s:
                    raise SystemExit(f"only {running} pods running after {args.fill_timeout_s} s")
            fill_s = time.monotonic() - started
            times: list[float] = []
            per_call: list[Counter[str]] = []
            for _ in range(args.steps):
                time.sleep(args.step_s)
                COUNTS.clear()
                t = time.perf_counter()
                controller.reconcile(run.run_id)
                times.append(time.perf_counter() - t)
                per_call.append(Counter(COUNTS))
            pods_listed = len(gke.list_pods(layer.job.name))
        setup_s = time.monotonic() - t0
    return {
        "cluster": "local Kubernetes (hollow nodes)",
        "pods": args.pods,
        "pods_listed": pods_listed,
        "nodes": len(nodes),
        "batches": layer.job.completions,
        "pods_running_after_s": round(fill_s, 1),
        **reconcile_figures(times, per_call),
        "bench_s": round(setup_s, 1),
    }


ROOT = Path(__file__).resolve().parents[1]
JOB = "pcg-lab-ingest-l2-4f2a9c"


def read_with_models(gke) -> list[PodInfo]:
    """The adapter's reads as they were: model classes, then back to the wire form."""
    from adapters.gke.cluster import PAGE
    from adapters.gke.wire import job_status, pod_info

    wire = gke.api_client.sanitize_for_serialization
    job_status(wire(gke.batch.read_namespaced_job(JOB, gke.namespace, **gke._opts)))
    items, token = [], None
    while True:
        kwargs = {"limit": PAGE, "label_selector": f"batch.kubernetes.io/job-name={JOB}"}
        if token:
            kwargs["_continue"] = token
        page = wire(gke.core.list_namespaced_pod(gke.namespace, **kwargs, **gke._opts))
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            break
    return sorted((pod_info(p) for p in items), key=lambda p: (p.index, p.created, p.name))


def read_as_json(gke) -> list[PodInfo]:
    """The adapter's reads as they are."""
    gke.get_job(JOB)
    return gke.list_pods(JOB)


def measure_decode(pods: int, repeats: int) -> dict[str, float]:
    """CPU-seconds (median of `repeats`) of one reconcile's reads of a `pods`-pod layer,
    before and after, answered from pre-encoded hand-written JSON; then the peak of traced Python
    memory during the reads as they are (the pages' JSON included) and what they keep (the
    PodInfos). The model classes' memory is not traced: that takes minutes at 5,000 pods."""
    sys.path.insert(0, str(ROOT))  # the fixture shapes and the transport stand-in
    from kubernetes.client import ApiClient, Configuration

    from adapters.gke.cluster import PAGE, GkeCluster
    from tests.builders.gke_api import ENDPOINT, FakeServer, api_object, pod_list_pages

    job_text = json.dumps(api_object("job_indexed_autopilot"))
    pages = [json.dumps(p) for p in pod_list_pages(pods, page=PAGE)]
    server = FakeServer()
    api = ApiClient(Configuration(host=ENDPOINT))
    api.call_api = server  # answers the HTTP; the client's own code runs as on GKE
    gke = GkeCluster(api, "pipeline")

    def queue() -> None:
        server.answers = [(200, job_text, "application/json")]
        server.answers += [(200, p, "application/json") for p in pages]

    row: dict[str, float] = {
        "pods": pods,
        "pages": len(pages),
        "json_mib": round(sum(map(len, pages)) / 2**20, 1),
    }
    results = {}
    for label, read in (("before", read_with_models), ("after", read_as_json)):
        times = []
        for _ in range(repeats):
            queue()
            t = time.process_time()
            results[label] = read(gke)
            times.append(time.process_time() - t)
        row[f"{label}_cpu_s"] = round(statistics.median(times), 3)
    assert results["before"] == results["after"], "the two reads disagree"
    row["speedup"] = round(row["before_cpu_s"] / max(row["after_cpu_s"], 1e-9), 1)
    row["after_cpu_s_per_1000_pods"] = round(row["after_cpu_s"] * 1000 / pods, 4)
    del results
    queue()
    tracemalloc.start()
    kept = read_as_json(gke)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    row["after_peak_mib"] = round(peak / 2**20, 1)
    row["after_kept_mib"] = round(current / 2**20, 1)
    return row


def main_decode(args: argparse.Namespace) -> None:
    rows = [measure_decode(int(n), args.steps) for n in args.decode_pods.split(",")]
    if not args.json:
        print(
            "the GKE adapter's reads of one running layer per reconcile (its Job, its pods in "
            f"pages of 500), CPU-seconds median of {args.steps}:"
        )
        for r in rows:
            print(
                f"  {r['pods']:>6} pods ({r['pages']} pages, {r['json_mib']} MiB JSON): "
                f"model classes {r['before_cpu_s']} s, JSON {r['after_cpu_s']} s "
                f"({r['speedup']}x); JSON peak {r['after_peak_mib']} MiB, "
                f"{r['after_kept_mib']} MiB kept"
            )
    print(json.dumps({"decode": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=5000, help="active pods")
    parser.add_argument("--batches", type=int, default=100_000, help="layer size (batches)")
    parser.add_argument("--steps", type=int, default=5, help="reconciles measured")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    parser.add_argument(
        "--decode", action="store_true", help="the GKE adapter's decoding, before and after"
    )
    parser.add_argument("--decode-pods", default="1000,5000", help="pod counts for --decode")
    parser.add_argument(
        "--kube", action="store_true", help="against local Kubernetes with hollow nodes"
    )
    parser.add_argument("--api-qps", type=int, default=200, help="--kube: the kcm's QPS")
    parser.add_argument("--run-s", type=float, default=86400.0, help="--kube: a pod's run")
    parser.add_argument("--step-s", type=float, default=5.0, help="--kube: between reconciles")
    parser.add_argument("--fill-timeout-s", type=float, default=900.0)
    args = parser.parse_args()
    if args.decode:
        main_decode(args)
        return
    instrument()
    with EmulatorSet(("firestore",)) as emus:
        import os

        os.environ.update(emus.env)
        store = FirestoreRunStore(f"bench-{uuid.uuid4().hex[:6]}")
        row = measure_kube(store, args) if args.kube else measure(store, args)
    if not args.json:
        if args.kube:
            print(f"one reconcile on {row['cluster']}, median of {args.steps}:")
        else:
            print(
                f"one reconcile, {row['pods']} active pods, {row['pods_finished_per_step']} "
                f"finishing per step, {row['batches']} batches in {row['completed_intervals']} "
                f"completed intervals (median of {args.steps})"
            )
        for key, value in row.items():
            print(f"  {key:>24}: {value}")
    print(json.dumps(row))


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: stop the emulators and pods first
