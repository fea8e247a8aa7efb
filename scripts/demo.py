"""The demo build: a synthetic volume ingested unattended on the local stack, then checked.

Steps: generate the volume; start the local stack; create the graph table (the `setup`
step); start a run (advance auto, unless told otherwise) through the same path an operator
uses; watch it while the controller drives every layer from Job events; finally compare the
table with a direct whole-volume computation (the oracle).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from shared import intervals
from shared.adapters.chunk_ledger import close_bigtable_client, open_bigtable_client
from shared.adapters.demo_graph import read_all_nodes
from shared.adapters.local_stack import LocalStack
from shared.build_plan import new_run
from shared.config import PipelineConfig
from shared.demo.oracle import compare, expected_stats, observed_stats
from shared.demo.volume import generate_volume, save_volume
from shared.layers import layer_count, layer_shape
from shared.manifest import validate_config_renders
from shared.state import RunState


class DemoTimeoutError(TimeoutError):
    """The run did not finish in time; the message says where it was."""


@dataclass
class DemoResult:
    ok: bool
    oracle: dict[str, Any]
    run: RunState
    wall_s: float
    pods: int
    retries: int
    chunk_compute_s: float
    alerts: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The `--json` object."""
        run = self.run
        latencies = [
            (ls.submitted_at - ls.eligible_at).total_seconds()
            for ls in run.layers.values()
            if ls.submitted_at and ls.eligible_at and ls.layer > 2
        ]
        return {
            "ok": self.ok,
            "oracle": self.oracle,
            "run_id": run.run_id,
            "status": run.status,
            "stages": run.stages,
            "layers": len(run.layers),
            "chunks": sum(self._chunks(ls.stage, ls.layer) for ls in run.layers.values()),
            "wall_s": round(self.wall_s, 2),
            "chunk_compute_s": round(self.chunk_compute_s, 3),
            "overhead_ratio": round(self.wall_s / self.chunk_compute_s, 1)
            if self.chunk_compute_s
            else None,
            "pods": self.pods,
            "retries": self.retries,
            "alerts": self.alerts,
            "advance_latency_s": round(statistics.median(latencies), 3) if latencies else None,
        }

    def _chunks(self, stage: str, layer: int) -> int:
        size = self.run.dataset["data_source"]["size"]
        chunk = self.run.dataset["graph_config"]["CHUNK_SIZE"]
        shape = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
        x, y, z = layer_shape(shape, layer)  # type: ignore[arg-type]
        return x * y * z


def prepare_config(cfg: PipelineConfig, workdir: Path, size: int | None,
                   chunk: int | None) -> PipelineConfig:  # fmt: skip
    """Apply --size/--chunk and point the dataset at the volume file the demo writes."""
    ds = cfg.ds
    source = ds.data_source.model_copy(
        update={
            "size": (size,) * 3 if size else ds.data_source.size,
            "watershed": str(workdir / "volume.npy"),
        }
    )
    graph = ds.graph_config.model_copy(update={"CHUNK_SIZE": (chunk,) * 3} if chunk else {})
    dataset = ds.model_copy(update={"data_source": source, "graph_config": graph})
    # Round-trip through validation so overrides obey the same rules as the files.
    out = PipelineConfig(**cfg.model_dump(exclude={"dataset_config"}))
    out = out.model_copy(update={"dataset_config": type(ds)(**dataset.model_dump())})
    validate_config_renders(out)
    return out


def _worker_compute_seconds(stack: LocalStack, jobs: list[str]) -> tuple[int, int, float]:
    """Pods run, failed attempts, and the sum of per-chunk compute from the workers' logs."""
    assert stack.cluster is not None
    pods = retries = 0
    compute = 0.0
    for name in jobs:
        for pod in stack.cluster.list_pods(name):
            pods += 1
            retries += pod.phase == "Failed"
            for line in stack.cluster.pod_log(pod.name, 50).splitlines():
                if '"chunk_compute_s"' in line:
                    try:
                        compute += float(json.loads(line)["chunk_compute_s"])
                    except (ValueError, KeyError):
                        pass
    return pods, retries, compute


def _count_alerts(stack: LocalStack, run_id: str) -> dict[str, int]:
    from shared.adapters.firestore_store import FirestoreRunStore

    counts: dict[str, int] = {}
    for alert in FirestoreRunStore(stack.project).all_alerts(run_id):
        counts[alert.kind] = counts.get(alert.kind, 0) + 1
    return counts


def run_demo(
    cfg: PipelineConfig,
    workdir: Path,
    *,
    stages: list[str],
    advance: str,
    timeout_s: float,
    on_progress: Callable[[RunState], None] = lambda run: None,
    volume_seed: int = 7,
) -> DemoResult:
    """Run the demo build end to end and check it with the oracle."""
    from shared.adapters.firestore_store import FirestoreRunStore
    from shared.adapters.pubsub_bus import PubSubBus

    workdir.mkdir(parents=True, exist_ok=True)
    volume = generate_volume(cfg.ds.data_source.size, volume_seed)
    save_volume(workdir / "volume.npy", volume)
    n_layers = layer_count(cfg.layer2_shape())
    with LocalStack(cfg.project, workdir / "stack", cfg.controller.tick_period_s) as stack:
        table = open_bigtable_client(
            cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance,
            timedelta(seconds=cfg.job.lock_expiry_s), create=True,
        )  # fmt: skip
        try:
            store = FirestoreRunStore(cfg.project)
            started = time.monotonic()
            run = new_run(cfg, f"{cfg.graph_id}-demo", stages, advance, _utcnow())
            store.create_run(run)
            bus = PubSubBus(cfg.project)
            bus.publish_json("kick", {"run_id": run.run_id, "action": "start", "by": "demo"})
            run = _watch(store, run.run_id, timeout_s, on_progress)
            wall = time.monotonic() - started
            nodes = read_all_nodes(table)
        finally:
            close_bigtable_client(table)
        jobs = [ls.job_name for ls in run.layers.values() if ls.job_name]
        pods, retries, compute = _worker_compute_seconds(stack, jobs)
        alerts = _count_alerts(stack, run.run_id)
    chunk_size = cfg.ds.graph_config.CHUNK_SIZE
    result = compare(expected_stats(volume, chunk_size, n_layers), observed_stats(nodes, n_layers))
    oracle = {"ok": result.ok, "mismatches": result.mismatches[:20]}
    ok = result.ok and run.status == "succeeded"
    return DemoResult(ok, oracle, run, wall, pods, retries, compute, alerts)


def _utcnow():  # noqa: ANN202
    from datetime import UTC, datetime

    return datetime.now(UTC)


def _watch(store: Any, run_id: str, timeout_s: float,
           on_progress: Callable[[RunState], None]) -> RunState:  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while True:
        run = store.load_run(run_id)
        on_progress(run)
        failed = [ls.key for ls in run.layers.values() if ls.phase == "failed"]
        if run.status in ("succeeded", "failed") or failed:
            return run
        if time.monotonic() > deadline:
            where = [
                f"{ls.key} {ls.phase} {intervals.count(ls.completed_indexes)}/{ls.completions}"
                for ls in run.ordered_layers()
                if ls.phase == "running"
            ]
            raise DemoTimeoutError(f"run {run_id} not finished after {timeout_s:.0f}s: {where}")
        time.sleep(0.5)
