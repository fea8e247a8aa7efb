"""The demo build: a synthetic volume ingested unattended on the local stack, then checked.

Steps: generate the volume; start the local stack; create the graph table and, for the
l2cache and meshing passes, their tables (what `pipeline setup` creates:
`scripts.run_tables`); start a run (advance auto, unless
told otherwise) through the same path an operator uses; watch it while the controller drives
every layer from Job events; finally compare the tables with a direct whole-volume computation
(the oracles: ingest, and l2cache and meshing if they ran).

In approve mode the demo can play the operator (demo.auto_approver): it approves each
layer a set time after the layer became eligible, exactly as `pipeline approve` does.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters import wiring
from adapters.bigtable.chunk_ledger import close_bigtable_client, open_bigtable_client
from adapters.bigtable.ledger_scan import done_chunk_ids
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import PubSubBus
from adapters.local.bigtable_meter import LocalBigtableMonitor
from adapters.local.stack import LocalStack, demo_sink_delay
from demo.auto_approver import APPROVER, AutoApprover
from demo.graph_table import read_all_nodes
from demo.oracles import check_all
from demo.stage_rows import STAGE_TABLE_SUFFIX, stage_table_id
from demo.stage_tables import read_l2cache, read_meshes
from demo.volume import generate_volume, save_volume
from scripts.bill_read import run_bill
from scripts.report_data import pod_records_by_layer
from scripts.run_tables import stage_tables
from scripts.services import Services
from shared.config.config import PipelineConfig
from shared.config.stage_selection import check_stages
from shared.forecast.forecast import run_forecast
from shared.forecast.rightsize_run import run_suggestions
from shared.jobs.layer_spec import layer_spec
from shared.jobs.render_check import validate_config_renders
from shared.model import intervals
from shared.model.layers import layer_count
from shared.model.phase import Phase, RunStatus
from shared.model.stages import dependencies
from shared.model.state import JobKind, RunState
from shared.money.costs import spend
from shared.money.pricing import load_rates
from shared.reconcile.build_plan import new_run
from shared.reconcile.canary import canary_summary
from shared.reconcile.completeness import StageVerdict, run_complete, verify_run
from shared.views.build_timeline import build_timeline


class DemoTimeoutError(RuntimeError):
    """The run did not finish in time; the message says where it was. Not a TimeoutError:
    nothing was unreachable (the CLI reads those as a service down)."""


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
    cost_usd: float = 0.0  # what the same pods would cost on Autopilot Spot
    chunks: int = 0  # over every layer of every stage
    # [elapsed_s, predicted_total_wall_s] each time a layer finished, and mid-layer
    # (EtaRecorder), with the error of the one made at about 40 % of the wall time
    eta_forecasts: list[list[float]] = field(default_factory=list)
    mid_layer_forecasts: int = 0
    forecast_error_at_40pct: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the chaos verdict (--chaos)
    # The ledger's verdict per stage (shared.reconcile.completeness; `pipeline verify`'s read).
    verify: dict[str, Any] = field(default_factory=dict)
    # The whole bill (shared.money.bill): each line's usd, measured and basis, and total_usd.
    bill: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The `--json` object."""
        run = self.run
        # A stage's first layer with nothing to wait for (ingest L2 in auto mode) starts in
        # the reconcile that sees the run: no latency to measure there.
        latencies = [
            (ls.timing.submitted_at - ls.timing.eligible_at).total_seconds()
            for ls in run.layers.values()
            if ls.timing.submitted_at
            and ls.timing.eligible_at
            and (ls.layer > 2 or dependencies(ls.stage) or run.advance != "auto")
        ]
        return {
            "ok": self.ok,
            "oracle": self.oracle,
            "verify": self.verify,
            "run_id": run.run_id,
            "status": run.status,
            "stages": run.stages,
            "layers": len(run.layers),
            "chunks": self.chunks,
            "wall_s": round(self.wall_s, 2),
            "chunk_compute_s": round(self.chunk_compute_s, 3),
            "overhead_ratio": round(self.wall_s / self.chunk_compute_s, 1)
            if self.chunk_compute_s
            else None,
            "pods": self.pods,
            "retries": self.retries,
            "alerts": self.alerts,
            "cost_usd": round(self.cost_usd, 6),
            "bill": self.bill,
            "advance": run.advance,
            "advance_latency_s": round(statistics.median(latencies), 3) if latencies else None,
            "approved_by_demo": sum(ls.approval.by == APPROVER for ls in run.layers.values()),
            "eta_forecasts": self.eta_forecasts,
            "mid_layer_forecasts": self.mid_layer_forecasts,
            "forecast_error_at_40pct": self.forecast_error_at_40pct,
            **self.extra,
        }


def prepare_config(
    cfg: PipelineConfig, workdir: Path, size: int | None, chunk: int | None
) -> PipelineConfig:
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
    out = cfg.model_copy(update={"dataset_config": dataset})
    mesh = ds.mesh_config
    root = layer_count(out.layer2_shape())
    if mesh is not None and mesh.max_layer and mesh.max_layer > root:
        # A smaller volume may have fewer layers: mesh up to its root.
        mesh = mesh.model_copy(update={"max_layer": root})
        dataset = dataset.model_copy(update={"mesh_config": mesh})
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


def verify_summary(run: RunState, verdicts: dict[str, StageVerdict]) -> dict[str, Any]:
    """The summary's `verify`: per stage `checked`, `chunks_marked` (None: not checked),
    `chunks_expected`, `complete`, the layers with chunks unmarked, and the layers the
    controller checked when their Job completed (`chunks_marked` recorded on the layer)."""
    return {
        name: {
            "checked": v.coverage.checkable,
            "chunks_marked": v.chunks_marked,
            "chunks_expected": v.chunks_expected,
            "complete": v.complete,
            "incomplete_layers": [lv.layer for lv in v.layers if not lv.complete],
            "checked_by_controller": [
                ls.layer
                for ls in run.ordered_layers()
                if ls.stage == name and ls.progress.chunks_marked is not None
            ],
        }
        for name, v in verdicts.items()
    }


def _count_alerts(store: FirestoreRunStore, run_id: str) -> dict[str, int]:
    return dict(Counter(alert.kind for alert in store.all_alerts(run_id)))


def run_demo(
    cfg: PipelineConfig,
    workdir: Path,
    *,
    stages: list[str],
    advance: str,
    timeout_s: float,
    on_progress: Callable[[RunState], None] = lambda run: None,
    volume_seed: int = 7,
    approve_after_s: float | None = None,
    on_finish: Callable[[FirestoreRunStore, RunState], None] | None = None,
    chaos: Any | None = None,
) -> DemoResult:
    """Run the demo build end to end and check it with the oracles.

    ``approve_after_s`` (approve mode): the demo approves each layer that many seconds after
    it became eligible (:class:`AutoApprover`); None leaves the approvals to an operator.
    ``on_finish(store, run)`` runs once the run ended, while the emulators still serve (the
    report is written there). ``chaos``: a `scripts.chaos_run.ChaosSession` that injects
    faults once the stack is up, plays the operator on failed layers and reads its verdict
    before the stack stops.
    """
    stages = check_stages(cfg, stages)  # fail fast, before the stack starts
    workdir.mkdir(parents=True, exist_ok=True)
    volume = generate_volume(cfg.ds.data_source.size, volume_seed)
    save_volume(workdir / "volume.npy", volume)
    n_layers = layer_count(cfg.layer2_shape())
    passes = [s for s in stages if s in STAGE_TABLE_SUFFIX]
    stack_started = time.monotonic()
    with wiring.local_stack(
        cfg.project,
        workdir / "stack",
        cfg.controller.tick_period_s,
        sink_delay_s=demo_sink_delay(),  # a log sink delay of a demo's scale
    ) as stack:
        stack_start_s = time.monotonic() - stack_started  # fixed: reported apart from the run
        expiry = timedelta(seconds=cfg.job.lock_expiry_s)
        # What `pipeline setup` makes, made the same way; the graph's table is left to an
        # image's ingest setup (docs/setup-passes.md).
        tables = {
            t.table_id: open_bigtable_client(
                t.table_id, cfg.bigtable.project, cfg.bigtable.instance, expiry, create=t.ours
            )
            for t in stage_tables(cfg, stages)
        }
        try:
            store = FirestoreRunStore(cfg.project)
            bus = PubSubBus(cfg.project)
            services = Services(cfg.project, store, bus)
            started = time.monotonic()
            run = new_run(cfg, f"{cfg.graph_id}-demo", stages, advance, datetime.now(UTC))
            store.create_run(run)
            if chaos is not None:
                chaos.begin(stack, store, services, tables[cfg.graph_id])
            services.kick(run.run_id, "start", "demo")
            approver = (
                AutoApprover(store, services.kick, approve_after_s)
                if advance == "approve" and approve_after_s is not None
                else None
            )
            etas = EtaRecorder(cfg, started)
            on_failed = None if chaos is None else chaos.on_failed
            ramp = RampWatch(started)  # the ramp's gate on the meter's load, as it happened
            watched = ramp.wrap(etas.wrap(on_progress))
            if chaos is not None:  # the chaos injector paces its faults by the run's progress
                watched = then_observe(watched, chaos.observe)
            run = _watch(store, run.run_id, timeout_s, watched, approver, on_failed)
            wall = time.monotonic() - started
            if chaos is not None:
                chaos.finish(cfg, run, tables[cfg.graph_id])
            verdicts = verify_run(cfg, run, lambda _, s: done_chunk_ids(tables[cfg.graph_id], s))
            nodes = read_all_nodes(tables[cfg.graph_id])
            rows = {s: _read_pass(s, tables[stage_table_id(cfg.graph_id, s)]) for s in passes}
            alerts = _count_alerts(store, run.run_id)
            timeline = build_timeline(run, pod_records_by_layer(store, run), datetime.now(UTC))
            if on_finish is not None:
                on_finish(store, run)
            bus.close()
        finally:
            if chaos is not None:
                chaos.end()
            for client in tables.values():
                close_bigtable_client(client)
        jobs = run.job_names(JobKind.LAYER)
        pods, retries, compute = _worker_compute_seconds(stack, jobs)
        # The whole bill, with what the stack's Bigtable meter saw (docs/bigtable-ramp-and-bill.md).
        assert stack.bigtable_meter is not None
        monitor = LocalBigtableMonitor(stack.bigtable_meter)
        bill = run_bill(cfg, run, run.finished_at or datetime.now(UTC), monitor)
        requests = stack.bigtable_meter.total
        assert stack.kube is not None
        cluster = stack.kube.summary()  # which Kubernetes ran it, and who wrote the Jobs' status
    oracle = check_all(cfg, run, volume, n_layers, nodes, rows)
    verify = verify_summary(run, verdicts)
    ok = oracle["ok"] and run.status == RunStatus.SUCCEEDED and run_complete(run, verdicts)
    cost = spend(cfg, run, load_rates(), run.finished_at or datetime.now(UTC))
    chunks = sum(layer_spec(cfg, ls.stage, ls.layer).chunks for ls in run.layers.values())
    result = DemoResult(ok, oracle, run, wall, pods, retries, compute, alerts, cost, chunks)
    result.eta_forecasts, result.mid_layer_forecasts = etas.entries, etas.mid_layer
    result.verify = verify
    result.bill = bill.as_dict()
    result.extra["bigtable"] = {"requests": requests, "ramp_timeline": ramp.entries}
    result.extra["cluster"] = cluster
    result.extra["timeline"] = {"stack_start_s": round(stack_start_s, 2), **timeline.to_json()}
    result.forecast_error_at_40pct = etas.error_at(wall)
    result.extra["rightsize"] = [s.to_dict() for s in run_suggestions(cfg, run)]
    canaries = canary_summary(run)
    for c in canaries:  # what happened, against the forecast (the canary's pods included)
        c["measured_cost_usd"] = round(cost, 6)
        c["measured_pods"] = pods + (c["pods"] or 0)
    if canaries:
        result.extra["canary"] = canaries[0] if len(canaries) == 1 else canaries
    return result


def then_observe(
    on_progress: Callable[[RunState], None], observe: Callable[[RunState], None]
) -> Callable[[RunState], None]:
    """The demo's poll callback: `on_progress`, then `observe` of the same run."""

    def progress(run: RunState) -> None:
        on_progress(run)
        observe(run)

    return progress


class RampWatch:
    """Each change of the running layers' parallelism or of why the ramp holds (a busy
    Bigtable: docs/bigtable-ramp-and-bill.md), as `[elapsed_s, parallelism, ramp_hold]`."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.entries: list[list[Any]] = []

    def wrap(self, on_progress: Callable[[RunState], None]) -> Callable[[RunState], None]:
        def progress(run: RunState) -> None:
            on_progress(run)
            running = [ls for ls in run.layers.values() if ls.phase == Phase.RUNNING]
            now = [sum(ls.job.parallelism for ls in running), run.ramp_hold]
            if running and (not self.entries or self.entries[-1][1:] != now):
                self.entries.append([round(time.monotonic() - self.started, 1), *now])

        return progress


class EtaRecorder:
    """The run's forecast total wall time (shared.forecast.forecast), as `[elapsed_s,
    predicted_total_wall_s]` entries: one each time a layer finishes, and mid-layer ones, each
    time a running layer has `step` more of its batches done or `every_s` have passed since
    the last entry, so the forecast can be judged at any point of the run (e.g. at 40 %)."""

    def __init__(
        self, cfg: PipelineConfig, started: float, step: float = 0.1, every_s: float = 5.0
    ) -> None:
        self.cfg, self.started = cfg, started
        self.step, self.every_s = step, every_s
        self.finished: set[str] = set()
        self.entries: list[list[float]] = []
        self.mid_layer = 0  # entries made while layers ran, not when one finished
        self.last_at = 0.0  # elapsed_s of the last entry
        self.seen: dict[str, int] = {}  # running layer -> batches done at its last entry

    def wrap(self, on_progress: Callable[[RunState], None]) -> Callable[[RunState], None]:
        return then_observe(on_progress, self.observe)

    def observe(self, run: RunState) -> None:
        """Record a forecast if a layer finished, or a running layer moved on enough."""
        elapsed = time.monotonic() - self.started
        done = {k for k, ls in run.layers.items() if ls.phase == Phase.SUCCEEDED}
        new = done - self.finished
        if new:
            self.finished |= done
            entry = self._entry(run, elapsed)
            self.entries.extend([list(entry) for _ in new])  # one per finished layer
            return
        running = [ls for ls in run.layers.values() if ls.phase == Phase.RUNNING]
        moved = any(
            intervals.count(ls.progress.completed_indexes) - self.seen.get(ls.key, 0)
            >= self.step * max(1, ls.job.completions)
            for ls in running
        )
        if running and (moved or elapsed - self.last_at >= self.every_s):
            self.entries.append(self._entry(run, elapsed))
            self.mid_layer += 1

    def _entry(self, run: RunState, elapsed: float) -> list[float]:
        fc = run_forecast(self.cfg, run, datetime.now(UTC))
        self.last_at = elapsed
        self.seen = {
            k: intervals.count(ls.progress.completed_indexes) for k, ls in run.layers.items()
        }
        return [round(elapsed, 2), round(elapsed + fc.remaining_s, 2)]

    def error_at(self, wall_s: float, share: float = 0.4) -> float | None:
        """(predicted - actual) / actual of the entry made closest to `share` of the final
        wall time (None without entries)."""
        if not self.entries or wall_s <= 0:
            return None
        _, predicted = min(self.entries, key=lambda e: abs(e[0] - share * wall_s))
        return round((predicted - wall_s) / wall_s, 3)


def _read_pass(stage: str, client: Any) -> dict[int, Any]:
    return read_l2cache(client) if stage == "l2cache" else read_meshes(client)


def _watch(
    store: Any,
    run_id: str,
    timeout_s: float,
    on_progress: Callable[[RunState], None],
    approver: AutoApprover | None = None,
    on_failed: Callable[[RunState], bool] | None = None,
) -> RunState:
    """Poll the run until it ends. `on_failed(run)` (chaos: the scripted operator) is asked
    when a layer failed; True keeps watching (it re-submits the layer when alerted)."""
    deadline = time.monotonic() + timeout_s
    while True:
        run = store.load_run(run_id)
        on_progress(run)
        failed = [ls.key for ls in run.ordered_layers() if ls.phase == Phase.FAILED]
        failed += [f"{s} setup" for s, st in run.setups.items() if st.phase == Phase.FAILED]
        ended = run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED) or failed
        if ended and not (run.status != RunStatus.SUCCEEDED and on_failed and on_failed(run)):
            return run
        if time.monotonic() > deadline:
            where = [
                f"{ls.key} {ls.phase} "
                f"{intervals.count(ls.progress.completed_indexes)}/{ls.job.completions}"
                for ls in run.ordered_layers()
                if ls.phase == Phase.RUNNING
            ]
            waiting = [
                ls.key
                for ls in run.ordered_layers()
                if ls.phase == Phase.WAITING
                and not ls.approval.granted
                and run.dependencies_met(ls)
            ]
            if waiting and run.advance != "auto":
                where.append(f"awaiting approval: {', '.join(waiting)}")
            raise DemoTimeoutError(f"run {run_id} not finished after {timeout_s:.0f}s: {where}")
        pause = 0.5
        if approver is not None:
            next_due = approver.step(run)
            if next_due is not None:
                pause = min(pause, max(next_due, 0.01))
        time.sleep(pause)
