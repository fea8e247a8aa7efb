"""Operator views and housekeeping: inspect, pods, events, top, costs, runs, purge, undeploy,
sample (DESIGN section 8).

Everything here READS the cluster (scripts.cluster_access) and Firestore; the only writes are
`purge` (Firestore documents of one run) and `undeploy` (a pause per running run, applied by
the controller like `pipeline pause`). A layer is named `RUN STAGE LAYER`; a Job the
controller does not track (a `pipeline sample` Job) is named with `--job NAME`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click
import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

from scripts import cluster_access
from scripts.cmd_grid import CONFIG_OPTION
from scripts.services import Services, connect, operator_name
from shared import grid, intervals
from shared import operator_actions as ops
from shared.adapters import pod_metrics
from shared.adapters.firestore_admin import purge_run, run_job_names
from shared.adapters.wiring import WiringError
from shared.cluster import ClusterError, ClusterUnreachableError, PodInfo
from shared.config import JobOverride, PipelineConfig, config_from_dict, load_config
from shared.controller import estimate
from shared.layers import layer_shape
from shared.manifest import MANAGED_BY, PREFIX, render_job
from shared.run_store import RunNotFoundError
from shared.state import LayerState, RunState, layer_key

TARGET = "RUN STAGE LAYER"
JOB_OPTION = click.option(
    "--job", "job", default=None, metavar="NAME",
    help="A Job by name instead of RUN STAGE LAYER (e.g. the Job of `pipeline sample`).",
)  # fmt: skip
SAMPLE_RUN_ID = "sample"
_EPOCH = datetime.min.replace(tzinfo=UTC)


class PurgeRefusedError(ValueError):
    """The run is still running: pause or delete it first (or --force)."""


@dataclass
class Target:
    """What a cluster-reading command looks at: a Job, and its run and layer if known."""

    job: str
    run: RunState | None = None
    ls: LayerState | None = None
    cfg: PipelineConfig | None = None

    @property
    def namespace(self) -> str | None:
        return self.cfg.namespace if self.cfg else None

    def geometry(self) -> tuple[tuple[int, int, int], int, int]:
        """(grid shape, seed, batch size) of the layer (run mode only)."""
        assert self.cfg is not None and self.ls is not None
        job = self.cfg.job.for_stage(self.ls.stage)
        shape = layer_shape(self.cfg.layer2_shape(), self.ls.layer)
        return shape, job.perm_seed, grid.layer_batch_size(job.batch_size, self.ls.layer)


# -- plumbing ------------------------------------------------------------------------------


def _console() -> Console:
    """Rich output; when piped, wide enough that names and messages are not cut."""
    return Console(width=None if sys.stdout.isatty() else 200)


def _services() -> Services:
    try:
        return connect()
    except WiringError as e:
        raise ValueError(str(e)) from None


@contextmanager
def cluster_errors() -> Iterator[None]:
    """Cluster failures as the CLI's exits: 2 when none is configured, 3 when unreachable,
    1 otherwise."""
    try:
        yield
    except cluster_access.ClusterAccessError as e:
        raise ValueError(str(e)) from e
    except ClusterUnreachableError as e:
        raise ConnectionError(str(e)) from e
    except ClusterError as e:
        raise click.ClickException(str(e)) from e


def _kick(services: Services, run_id: str, action: str) -> None:
    try:
        services.kick(run_id, action, operator_name())
    except Exception as e:  # noqa: BLE001 - the action is stored; the next tick applies it
        click.echo(f"warning: kick for {run_id} not sent ({e}); the controller's next tick "
                   "applies the change", err=True)  # fmt: skip


def _resolve(
    args: tuple[str, ...], job: str | None, extra: int, *, need_job: bool
) -> tuple[Target, list[str]]:
    """`RUN STAGE LAYER [up to `extra` more]`, or `--job NAME [up to `extra` more]`."""
    if job:
        if len(args) > extra:
            raise click.UsageError(f"with --job, give at most {extra} argument(s), not {args}")
        return Target(job), list(args)
    if not 3 <= len(args) <= 3 + extra:
        raise click.UsageError(f"give {TARGET}{' [INDEX]' if extra else ''} (or --job NAME)")
    run_id, stage, raw_layer = args[:3]
    run = _services().store.load_run(run_id)
    ls = run.layers.get(layer_key(stage, _int(raw_layer, "LAYER")))
    if ls is None:
        known = ", ".join(f"{s} L2-L{run.top_layers[s]}" for s in run.stages)
        raise LookupError(f"run {run_id} has no layer {stage} L{raw_layer} (it has: {known})")
    if need_job and not ls.job_name:
        raise LookupError(f"{ls.key} of run {run_id} is {ls.phase}: it has no Job yet")
    return Target(ls.job_name, run, ls, config_from_dict(run.config, run.dataset)), list(args[3:])


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(f"{what} must be an integer, got {text!r}") from None


def _when(stamp: datetime | None) -> str:
    return stamp.astimezone(UTC).strftime("%m-%d %H:%M:%S") if stamp else ""


def _span(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.1f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"


def _runtime(pod: PodInfo, now: datetime) -> float | None:
    return None if pod.started is None else ((pod.finished or now) - pod.started).total_seconds()


def _first_chunk(target: Target, index: int) -> tuple[int, int, int]:
    shape, seed, size = target.geometry()
    return tuple(int(v) for v in grid.batch_coords(index, shape, seed, size)[0])  # type: ignore[return-value]


# -- worker logs -------------------------------------------------------------------------------


def _records(text: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    for raw in text.splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None
        yield raw, rec if isinstance(rec, dict) else None


def render_log(text: str) -> list[str]:
    """Worker JSON lines as `time severity message [chunk, exit]`, tracebacks unfolded;
    other lines as they are."""
    out: list[str] = []
    for raw, rec in _records(text):
        if rec is None:
            out.append(raw)
            continue
        tags = [f"chunk {rec['chunk']}"] if rec.get("chunk") else []
        tags += [f"exit {rec['exit_code']}"] if rec.get("exit_code") is not None else []
        line = f"{rec.get('time', '')} {rec.get('severity', ''):<7} {rec.get('message', '')}"
        out.append(line.strip() + (f"  [{', '.join(tags)}]" if tags else ""))
        if rec.get("traceback"):
            out += ["    " + t for t in str(rec["traceback"]).rstrip().splitlines()]
    return out


def failing_chunk(text: str) -> dict[str, Any] | None:
    """The last worker record that carries a traceback (the failure that ended the pod)."""
    found = None
    for _, rec in _records(text):
        if rec is not None and rec.get("traceback"):
            found = rec
    return found


# -- inspect ------------------------------------------------------------------------------------


def _alerts_of(services: Services, target: Target) -> list[Any]:
    assert target.run is not None and target.ls is not None
    return [
        a for a in services.store.all_alerts(target.run.run_id)
        if a.body.get("stage") == target.ls.stage and a.body.get("layer") == target.ls.layer
    ]  # fmt: skip


def _alert_summary(body: dict[str, Any]) -> str:
    keys = ("indexes", "reason", "failed_indexes", "no_progress_s", "advance", "status", "fix")
    return "; ".join(f"{k} {body[k]}" for k in keys if body.get(k) not in (None, "", []))


def _inspect_layer(console: Console, target: Target, limit: int) -> None:
    ls, run = target.ls, target.run
    assert ls is not None and run is not None
    failed = ls.failed_indexes
    console.print(
        f"{ls.stage} L{ls.layer} of run {run.run_id}: {ls.phase}"
        + (f" ({ls.failure_reason})" if ls.failure_reason else "")
        + (f", job {ls.job_name}" if ls.job_name else "")
    )
    console.print(
        f"failed indexes: {failed or 'none'} ({intervals.count(failed)}) · retries (failed pod "
        f"attempts): {ls.pods_failed} · preempted: {ls.pods_preempted}",
        markup=False,
    )
    indexes = intervals.parse(failed)
    if indexes:
        _, _, size = target.geometry()
        table = Table("index", "first chunk", "chunks", title_justify="left")
        for index in indexes[:limit]:
            table.add_row(str(index), str(_first_chunk(target, index)), str(size))
        console.print(table)
        if len(indexes) > limit:
            console.print(f"... and {len(indexes) - limit} more (--limit)")
        hint = f"pipeline inspect {run.run_id} {ls.stage} {ls.layer} {indexes[0]}"
        console.print(f"next: `{hint}` for a batch's pods, log and traceback", markup=False)
    alerts = _alerts_of(_services(), target)
    if alerts:
        table = Table("time", "alert", "details", title="alerts", title_justify="left")
        for a in alerts:
            table.add_row(_when(a.created_at), a.kind, _alert_summary(a.body))
        console.print(table)


def _inspect_index(console: Console, cluster: Any, target: Target, index: int, tail: int,
                   chunks: bool) -> None:  # fmt: skip
    now = datetime.now(UTC)
    coords: list[tuple[int, ...]] = []
    head = f"job {target.job} batch {index}"
    if target.ls is not None:
        shape, seed, size = target.geometry()
        coords = [tuple(int(v) for v in c) for c in grid.batch_coords(index, shape, seed, size)]
        assert target.run is not None
        head = (f"{target.ls.stage} L{target.ls.layer} batch {index} of run "
                f"{target.run.run_id} (job {target.job}): {len(coords)} chunks, first "
                f"{coords[0]}")  # fmt: skip
        if index in intervals.parse(target.ls.failed_indexes):
            head += " · FAILED index"
    console.print(head, markup=False)
    pods = sorted(cluster.list_pods(target.job, index), key=lambda p: p.created or _EPOCH)
    table = Table("attempt", "pod", "phase", "exit", "reason", "node", "started", "runtime",
                  title="pods (attempts)", title_justify="left")  # fmt: skip
    for n, p in enumerate(pods, 1):
        exit_code = "" if p.exit_code is None else str(p.exit_code)
        table.add_row(str(n), p.name, p.phase, exit_code, p.reason or "", p.node,
                      _when(p.started), _span(_runtime(p, now)))  # fmt: skip
    log_text, source = "", ""
    if pods:
        console.print(table)
        log_text, source = cluster.pod_log(pods[-1].name, tail), f"pod {pods[-1].name}"
    else:
        console.print("no pods of this index in the cluster (not started yet, or removed)")
        if target.run is not None:
            log_text, source = _alert_log_tail(target, index)
    found = failing_chunk(log_text)
    if found:
        console.print(
            f"failing chunk: {found.get('chunk', '?')} coord {found.get('coord', '?')} "
            f"exit {found.get('exit_code', '?')}: {found.get('message', '')}",
            markup=False,
        )
    if source:
        click.echo(f"--- log tail of {source} (last {tail} lines) ---")
        for line in render_log(log_text) or ["(empty)"]:
            click.echo(line)
    if chunks and coords:
        click.echo(f"--- the {len(coords)} chunks of batch {index}, in processing order ---")
        for c in coords:
            click.echo(str(c))


def _alert_log_tail(target: Target, index: int) -> tuple[str, str]:
    """A failed index's log tail as its alert recorded it (pods may be gone since)."""
    for alert in reversed(_alerts_of(_services(), target)):
        for batch in alert.body.get("batches") or []:
            if batch.get("index") == index and batch.get("log_tail"):
                return batch["log_tail"], f"the {alert.kind} alert of {_when(alert.created_at)}"
    return "", ""


# -- pods, events, top --------------------------------------------------------------------------


def _event_time(event: dict[str, Any]) -> datetime:
    series = event.get("series") or {}
    for value in (series.get("lastObservedTime"), event.get("lastTimestamp"),
                  event.get("eventTime"), event.get("firstTimestamp"),
                  (event.get("metadata") or {}).get("creationTimestamp")):  # fmt: skip
        try:
            stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
        except ValueError:  # absent ("" / None) or not ISO 8601: try the next one
            continue
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    return _EPOCH


def _all_events(cluster: Any, job: str) -> list[dict[str, Any]]:
    events = list(cluster.job_events(job)) + cluster_access.pod_events(cluster, job)
    return sorted(events, key=_event_time)


def _scheduling_messages(cluster: Any, job: str) -> dict[str, str]:
    """Pod name -> the scheduler's latest word on it (why it is Pending)."""
    out: dict[str, str] = {}
    for e in _all_events(cluster, job):
        obj = e.get("involvedObject") or {}
        if obj.get("kind") == "Pod" and e.get("reason") == "FailedScheduling":
            out[obj.get("name", "")] = e.get("message", "")
    return out


def pods_table(cluster: Any, target: Target, phase: str | None = None) -> Table:
    now = datetime.now(UTC)
    pods = sorted(cluster.list_pods(target.job), key=lambda p: (p.index, p.created or _EPOCH))
    if phase:
        pods = [p for p in pods if p.phase.lower() == phase.lower()]
    why = _scheduling_messages(cluster, target.job) if any(
        p.phase == "Pending" for p in pods) else {}  # fmt: skip
    table = Table("index", "pod", "phase", "node", "reason", "started", "runtime", "exit",
                  title=f"pods of job {target.job}: {len(pods)}", title_justify="left")  # fmt: skip
    for p in pods:
        reason = p.reason or ""
        if p.phase == "Pending" and why.get(p.name):
            reason = f"{reason}: {why[p.name]}" if reason else why[p.name]
        table.add_row(str(p.index), p.name, p.phase, p.node, reason, _when(p.started),
                      _span(_runtime(p, now)),
                      "" if p.exit_code is None else str(p.exit_code))  # fmt: skip
    return table


def events_table(cluster: Any, target: Target) -> Table:
    events = _all_events(cluster, target.job)
    table = Table("time", "type", "reason", "object", "message",
                  title=f"events of job {target.job} and its pods: {len(events)}",
                  title_justify="left")  # fmt: skip
    for e in events:
        obj = e.get("involvedObject") or {}
        what = "job" if obj.get("kind") == "Job" else f"{obj.get('kind', '?')}/{obj.get('name')}"
        count = f" (x{e['count']})" if (e.get("count") or 1) > 1 else ""
        table.add_row(_when(_event_time(e)), e.get("type", ""), e.get("reason", ""), what,
                      f"{e.get('message', '')}{count}")  # fmt: skip
    return table


def pod_usage(cluster: Any, job: str, pods: list[PodInfo]) -> tuple[dict[str, Any], str]:
    """Usage of the running pods by name, and a note when it is not available."""
    running = [p for p in pods if p.phase == "Running"]
    if not running:
        return {}, ""
    if cluster_access.is_local(cluster):
        logs = {p.name: cluster.pods_dir / f"{p.name}.log" for p in running}
        pids = pod_metrics.pids_by_log_file(logs.values())
        found = {name: pids[path] for name, path in logs.items() if pids.get(path)}
        usage = pod_metrics.local_usage(found)
        note = "" if usage else (
            "usage unavailable: none of these local pods' processes is visible in /proc "
            "(the local cluster must run on this machine, as this user, on Linux)"
        )  # fmt: skip
        return usage, note
    if hasattr(cluster, "api_client"):
        try:
            usage = pod_metrics.gke_pod_usage(cluster.api_client, cluster.namespace, job)
        except pod_metrics.MetricsUnavailableError as e:
            return {}, f"usage unavailable: {e}"
        missing = len(running) - sum(p.name in usage for p in running)
        note = f"{missing} running pod(s) have no metrics sample yet" if missing else ""
        return usage, note
    return {}, "usage unavailable for this kind of cluster"


def _pct(used: float, request: float) -> str:
    return f"{100 * used / request:.0f}%" if request else ""


def top_table(cluster: Any, target: Target) -> Table:
    pods = [p for p in cluster.list_pods(target.job) if p.phase in ("Running", "Pending")]
    pods.sort(key=lambda p: (p.index, p.created or _EPOCH))
    usage, note = pod_usage(cluster, target.job, pods)
    table = Table("index", "pod", "phase", "cpu", "cpu req", "cpu %", "mem GiB", "mem req",
                  "mem %", title=f"usage vs request, job {target.job} ({_when(datetime.now(UTC))})",
                  title_justify="left")  # fmt: skip
    peak = [0.0, 0.0, 0.0, 0.0]  # cpu, mem, cpu%, mem%
    for p in pods:
        u = usage.get(p.name)
        cells = ["", "", "", ""] if u is None else [
            f"{u.cpu:.2f}", _pct(u.cpu, p.cpu_request), f"{u.memory_gib:.2f}",
            _pct(u.memory_gib, p.memory_request_gib)]  # fmt: skip
        if u is not None:
            peak = [max(peak[0], u.cpu), max(peak[1], u.memory_gib),
                    max(peak[2], u.cpu / p.cpu_request if p.cpu_request else 0),
                    max(peak[3], u.memory_gib / p.memory_request_gib if p.memory_request_gib
                        else 0)]  # fmt: skip
        table.add_row(str(p.index), p.name, p.phase, cells[0], f"{p.cpu_request:g}", cells[1],
                      cells[2], f"{p.memory_request_gib:g}", cells[3])  # fmt: skip
    notes = [note] if note else []
    if usage:
        notes.append(f"peak: {peak[0]:.2f} vCPU ({100 * peak[2]:.0f}% of request), "
                     f"{peak[1]:.2f} GiB ({100 * peak[3]:.0f}%)")  # fmt: skip
    if not pods:
        notes.append("no running or pending pods")
    table.caption, table.caption_justify = " · ".join(notes), "left"
    return table


# -- costs and runs --------------------------------------------------------------------------------


def cost_report(run: RunState, now: datetime) -> dict[str, Any]:
    """A run's estimated cost by layer and stage, the cluster fee and the total (JSON-ready)."""
    cfg = config_from_dict(run.config, run.dataset)
    est = estimate(cfg, run, now)
    by_key = {lc.key: lc for lc in est.layers}
    layers, stages = [], {}
    for ls in run.ordered_layers():
        lc = by_key.get(ls.key)
        if lc is None:
            continue  # never submitted: nothing spent
        layers.append({
            "stage": ls.stage, "layer": ls.layer, "phase": ls.phase,
            "pods": ls.pods_succeeded + ls.pods_failed + ls.pods_preempted,
            "retries": ls.pods_failed, "preempted": ls.pods_preempted,
            "vcpu_hours": (ls.cpu_seconds + ls.running_cpu_seconds) / 3600,
            "gib_hours": (ls.memory_gib_seconds + ls.running_memory_gib_seconds) / 3600,
            "usd": lc.usd, "backfilled_pods": lc.backfilled_pods,
        })  # fmt: skip
        stages[ls.stage] = stages.get(ls.stage, 0.0) + lc.usd
    models = {s: ("Spot" if cfg.job.for_stage(s).spot else "on-demand") for s in run.stages}
    classes = {s: cfg.job.for_stage(s).compute_class or "general-purpose" for s in run.stages}
    return {
        "run_id": run.run_id, "graph_id": run.graph_id, "status": run.status,
        "estimate": True, "region": cfg.region, "priced_at": now.isoformat(),
        "provisioning": models, "compute_class": classes, "layers": layers,
        "stages": stages, "cluster_fee_usd": est.cluster_fee_usd, "total_usd": est.usd,
    }  # fmt: skip


def _pricing_label(report: dict[str, Any]) -> str:
    models = set(report["provisioning"].values())
    model = models.pop() if len(models) == 1 else "Spot/on-demand by stage"
    classes = sorted(set(report["compute_class"].values()) - {"general-purpose"})
    return ", ".join(["estimate", model, report["region"], *classes])


def costs_table(report: dict[str, Any]) -> Table:
    cols = ("stage", "layer", "phase", "pods", "retries", "vCPU-h", "GiB-h", "cost USD",
            "backfilled")  # fmt: skip
    table = Table(*cols, title=f"run {report['run_id']} · {_pricing_label(report)}",
                  title_justify="left")  # fmt: skip
    rows = report["layers"]
    for stage, usd in report["stages"].items():
        for r in (r for r in rows if r["stage"] == stage):
            table.add_row(stage, str(r["layer"]), r["phase"], str(r["pods"]), str(r["retries"]),
                          f"{r['vcpu_hours']:.3f}", f"{r['gib_hours']:.3f}", f"{r['usd']:.4f}",
                          str(r["backfilled_pods"] or ""))  # fmt: skip
        table.add_row(f"[bold]{stage}[/]", "", "subtotal", "", "", "", "", f"[bold]{usd:.4f}[/]",
                      "", end_section=True)  # fmt: skip
    table.add_row("cluster fee", "", "", "", "", "", "", f"{report['cluster_fee_usd']:.4f}", "")
    table.add_row("[bold]total[/]", "", "", "", "", "", "", f"[bold]{report['total_usd']:.4f}[/]",
                  "")  # fmt: skip
    table.caption = ("vCPU-h and GiB-h are the recorded pods' requests x runtime; backfilled pods "
                     "(finished unseen) are priced at the layer's mean runtime")  # fmt: skip
    table.caption_justify = "left"
    return table


def runs_table(services: Services, graph: str | None, now: datetime) -> Table:
    table = Table("run", "graph", "status", "stages", "layers done", "created", "cost USD",
                  title="runs, newest first (cost: estimate, priced now)",
                  title_justify="left")  # fmt: skip
    for summary in services.store.list_runs():
        if graph and summary.graph_id != graph:
            continue
        try:
            run = services.store.load_run(summary.run_id)
        except RunNotFoundError:  # purged meanwhile
            continue
        try:
            cost = f"{estimate(config_from_dict(run.config, run.dataset), run, now).usd:.2f}"
        except ValueError as e:  # an old snapshot, a region the rate table lacks
            cost = f"? ({str(e).splitlines()[0][:40]})"
        done = sum(ls.phase == "succeeded" for ls in run.layers.values())
        created = f"{run.created_at:%Y-%m-%d %H:%M}" if run.created_at else ""
        table.add_row(run.run_id, run.graph_id, run.status, ",".join(run.stages),
                      f"{done}/{len(run.layers)}", created, cost)  # fmt: skip
    return table


# -- sample --------------------------------------------------------------------------------------


def sample_job(cfg: PipelineConfig, stage: str, layer: int, n: int) -> dict[str, Any]:
    """The layer's Job with batch size 1 and `n` completions: pod i builds the chunk at
    shuffled position i, so the n chunks are scattered over the whole grid."""
    override = cfg.job.workloads.get(stage) or JobOverride()
    workloads = {**cfg.job.workloads, stage: override.model_copy(update={"batch_size": 1})}
    one = cfg.model_copy(update={"job": cfg.job.model_copy(update={"workloads": workloads})})
    parallelism = min(n, one.job.for_stage(stage).ramp.max)
    manifest = render_job(one, stage, layer, run_id=SAMPLE_RUN_ID, parallelism=parallelism)
    # `...-l<layer>-sample`: a run's Jobs end in a hex hash, so this never names one of them.
    manifest["metadata"]["name"] = manifest["metadata"]["name"].rsplit("-", 1)[0] + "-sample"
    chunks = int(manifest["metadata"]["annotations"][PREFIX + "chunks"])
    if n > chunks:
        raise ValueError(f"{stage} layer {layer} has {chunks} chunks: sample at most {chunks}")
    spec = manifest["spec"]
    # Every sampled chunk should run: failing ones do not stop the others.
    spec["completions"], spec["maxFailedIndexes"] = n, n
    manifest["metadata"]["annotations"][PREFIX + "sample"] = str(n)
    return manifest


def sample_chunks(cfg: PipelineConfig, stage: str, layer: int, n: int) -> list[tuple[int, ...]]:
    shape = layer_shape(cfg.layer2_shape(), layer)
    seed = cfg.job.for_stage(stage).perm_seed
    return [tuple(int(v) for v in grid.batch_coords(i, shape, seed, 1)[0]) for i in range(n)]


# -- undeploy ------------------------------------------------------------------------------------


def _remaining_jobs(console: Console) -> None:
    try:
        with cluster_errors():
            cluster = cluster_access.read_cluster()
            jobs = cluster.list_jobs({"app.kubernetes.io/managed-by": MANAGED_BY})
    except (click.ClickException, ConnectionError, ValueError) as e:
        msg = e.format_message() if isinstance(e, click.ClickException) else str(e)
        console.print(f"(cannot list the cluster's Jobs: {msg})", markup=False)
        return
    table = Table("job", "run", "stage", "layer", "state", "active",
                  title=f"pipeline Jobs in the cluster: {len(jobs)}",
                  title_justify="left")  # fmt: skip
    for j in jobs:
        state = j.condition or ("suspended" if j.suspended else "running")
        run_id = j.annotations.get(PREFIX + "run-id", j.labels.get(PREFIX + "run", ""))
        table.add_row(j.name, run_id, j.labels.get(PREFIX + "stage", ""),
                      j.labels.get(PREFIX + "layer", ""), state, str(j.active))  # fmt: skip
    console.print(table)


# -- commands ------------------------------------------------------------------------------------


def _local_stack() -> bool:
    try:
        return cluster_access.local_cluster_dir() is not None
    except ClusterError:
        return False


def _live(render: Callable[[], Table], once: bool, interval: float) -> None:
    console = _console()
    if once:
        console.print(render())
        return
    with Live(render(), console=console) as live:
        while True:
            time.sleep(interval)
            live.update(render())


def register(main: click.Group) -> None:  # noqa: C901 - one closure per command
    @main.command()
    @click.argument("args", nargs=-1, metavar=f"{TARGET} [INDEX]")
    @JOB_OPTION
    @click.option("--tail", type=click.IntRange(min=1), default=50, show_default=True,
                  help="Log lines of the index's latest pod.")  # fmt: skip
    @click.option("--chunks", is_flag=True, help="List the batch's chunks too.")
    @click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True,
                  help="Failed indexes to list.")  # fmt: skip
    def inspect(args: tuple[str, ...], job: str | None, tail: int, chunks: bool,
                limit: int) -> None:  # fmt: skip
        """A layer's failed indexes (each with its batch's first chunk), retries and alerts;
        with INDEX, that batch's pods, the failing chunk and the latest pod's log tail with
        its traceback. `--job NAME INDEX` inspects an untracked Job (a sample)."""
        target, rest = _resolve(args, job, 1, need_job=False)
        console = _console()
        if not rest:
            if target.ls is None:
                with cluster_errors():
                    status = cluster_access.read_cluster().get_job(target.job)
                if status is None:
                    raise LookupError(f"no job {target.job!r} in the cluster")
                failed = status.failed_indexes
                console.print(f"job {status.name}: failed indexes {failed or 'none'} "
                              f"({intervals.count(failed)})", markup=False)  # fmt: skip
                return
            _inspect_layer(console, target, limit)
            return
        index = _int(rest[0], "INDEX")
        if target.ls is not None and not target.job:
            raise LookupError(f"{target.ls.key} is {target.ls.phase}: it has no Job yet")
        if target.ls is not None:
            _, _, size = target.geometry()
            n = grid.num_batches(layer_shape(target.cfg.layer2_shape(), target.ls.layer), size)  # type: ignore[union-attr]
            if not 0 <= index < n:
                raise click.BadParameter(f"INDEX {index}: this layer's batches are 0..{n - 1}")
        with cluster_errors():
            cluster = cluster_access.read_cluster(target.namespace)
            _inspect_index(console, cluster, target, index, tail, chunks)

    @main.command()
    @click.argument("args", nargs=-1, metavar=TARGET)
    @JOB_OPTION
    @click.option("--phase", type=click.Choice(["Pending", "Running", "Succeeded", "Failed"],
                  case_sensitive=False), default=None, help="Only pods in this phase.")  # fmt: skip
    def pods(args: tuple[str, ...], job: str | None, phase: str | None) -> None:
        """The layer's pods: index, phase, node, reason (why Pending), started, runtime, exit."""
        target, _ = _resolve(args, job, 0, need_job=True)
        with cluster_errors():
            cluster = cluster_access.read_cluster(target.namespace)
            _console().print(pods_table(cluster, target, phase))

    @main.command()
    @click.argument("args", nargs=-1, metavar=TARGET)
    @JOB_OPTION
    def events(args: tuple[str, ...], job: str | None) -> None:
        """The layer's Job events and its pods' (scheduling, scale-up, failures), oldest first."""
        target, _ = _resolve(args, job, 0, need_job=True)
        with cluster_errors():
            _console().print(events_table(cluster_access.read_cluster(target.namespace), target))

    @main.command()
    @click.argument("args", nargs=-1, metavar=TARGET)
    @JOB_OPTION
    @click.option("-o", "--once", is_flag=True, help="One snapshot, then exit.")
    @click.option("-i", "--interval", type=float, default=5.0, show_default=True)
    def top(args: tuple[str, ...], job: str | None, once: bool, interval: float) -> None:
        """Live per-pod CPU and memory usage vs request, by index (GKE: the metrics API;
        local: /proc). Size `job.resources` from the peak."""
        target, _ = _resolve(args, job, 0, need_job=True)
        with cluster_errors():
            cluster = cluster_access.read_cluster(target.namespace)
            _live(lambda: top_table(cluster, target), once, interval)

    @main.command()
    @click.argument("run_id")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def costs(run_id: str, as_json: bool) -> None:
        """A run's estimated spend by stage and layer, the cluster fee and the total, priced
        now from the rate table for the run's region (Autopilot bills requests x runtime)."""
        report = cost_report(_services().store.load_run(run_id), datetime.now(UTC))
        if as_json:
            click.echo(json.dumps(report, indent=2))
        else:
            _console().print(costs_table(report))

    @main.command()
    @click.option("--graph", default=None, help="Only runs of this graph id.")
    def runs(graph: str | None) -> None:
        """Every recorded run, newest first, with its estimated cost."""
        _console().print(runs_table(_services(), graph, datetime.now(UTC)))

    @main.command()
    @click.argument("run_id")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @click.option("--force", is_flag=True, help="Purge even a running run.")
    def purge(run_id: str, yes: bool, force: bool) -> None:
        """Delete a run's Firestore documents: run, layers, pod records, alerts and its Job
        map entries. Kubernetes Jobs are untouched (delete them with kubectl, or let
        `terraform destroy` take them with the cluster)."""
        services = _services()
        db = services.store.db
        try:
            run: RunState | None = services.store.load_run(run_id)
        except RunNotFoundError:
            if not run_job_names(db, run_id):
                raise
            run = None  # a half-finished purge: finish it
        if run is not None and run.status == "running" and not force:
            raise PurgeRefusedError(
                f"run {run_id} is running: `pipeline pause {run_id}` (or `pipeline delete "
                f"{run_id} STAGE LAYER`) first, or purge with --force (its Jobs keep running, "
                "untracked)"
            )
        names = run_job_names(db, run_id)
        what = f"{run.status} run {run_id} ({len(run.layers)} layers)" if run else f"run {run_id}"
        if not yes:
            click.confirm(f"Delete every Firestore document of {what}? Kubernetes Jobs are "
                          "untouched", abort=True)  # fmt: skip
        deleted = purge_run(db, run_id)
        click.echo(f"purged {run_id}: {deleted} documents deleted (run, layers, pod records, "
                   f"alerts, {len(names)} job map entries)")  # fmt: skip
        if names:
            ns = config_from_dict(run.config, run.dataset).namespace if run else "<namespace>"
            click.echo(f"Kubernetes Jobs untouched; if still there: kubectl delete job -n {ns} "
                       + " ".join(names))  # fmt: skip

    @main.command()
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    def undeploy(yes: bool) -> None:
        """Pause every running run (the controller suspends their Jobs, as `pipeline pause`),
        then list what remains for `terraform destroy`. Re-run it to see the Jobs suspended."""
        services, console = _services(), _console()
        active = [services.store.load_run(r) for r in services.store.active_runs()]
        running = [r.run_id for r in active if r.status == "running"]
        if running and not yes:
            click.confirm(f"Pause {len(running)} running run(s): {', '.join(running)}?",
                          abort=True)  # fmt: skip
        for run_id in running:
            try:
                services.store.update_run(run_id, ops.pause)
            except ops.ActionError:  # finished or paused meanwhile
                continue
            _kick(services, run_id, "pause")
        table = Table("run", "graph", "status", "layers with a Job",
                      title=f"active runs: {len(active)} ({len(running)} paused now)",
                      title_justify="left")  # fmt: skip
        for r in active:
            status = "paused" if r.run_id in running else r.status
            jobs = [ls.key for ls in r.ordered_layers() if ls.phase == "running"]
            table.add_row(r.run_id, r.graph_id, status, ", ".join(jobs))
        console.print(table)
        _remaining_jobs(console)
        local = _local_stack()
        lines = [
            "What remains:",
            "  - suspended Jobs run no pods (no compute cost); deleting the cluster deletes them",
            "  - run history and costs in Firestore: `terraform destroy` leaves the database; "
            "`pipeline purge RUN` removes a run",
            "  - Bigtable tables and buckets are not managed by terraform: left intact",
            "local stack: stop `pipeline local up` (Ctrl-C); there is nothing to destroy" if local
            else "next: cd terraform && terraform destroy (with deletion_protection = false)",
        ]  # fmt: skip
        click.echo("\n".join(lines))

    @main.command()
    @CONFIG_OPTION
    @click.argument("stage")
    @click.argument("layer", type=int)
    @click.argument("n", type=click.IntRange(min=1))
    @click.option("--chunks", is_flag=True, help="List the sampled chunks (on stderr).")
    def sample(config_path: str, stage: str, layer: int, n: int, chunks: bool) -> None:
        """Print a Job that builds N scattered chunks of STAGE LAYER, one per pod, to size CPU
        and memory before the full run.

        It is the layer's Job with batch size 1 and N completions: pod i builds shuffled
        position i, and the shuffle spreads positions 0..N-1 over the whole grid. The
        controller does not track it; apply it yourself (GKE), then watch it with
        `pipeline top --job NAME`. The chunks are built for real: ingest marks them done and
        the full run skips them, so sample a layer only once the layer below is complete.
        """
        cfg = load_config(config_path)
        manifest = sample_job(cfg, stage, layer, n)
        name, ns = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        click.echo(yaml.safe_dump(manifest, sort_keys=False), nl=False)
        total = manifest["metadata"]["annotations"][PREFIX + "chunks"]
        note = [
            f"# sample: {n} of {total} chunks of {stage} L{layer}, one per pod (batch size 1), "
            f"scattered by the shuffle (seed {cfg.job.for_stage(stage).perm_seed})",
        ]
        if _local_stack():
            note.append("# the local stack's cluster runs only the Jobs its controller creates: "
                        "this cannot be applied to it from the CLI; watch a run's layer with "
                        "`pipeline top RUN STAGE LAYER` instead")  # fmt: skip
        else:
            note.append(f"# apply:  pipeline sample -c {config_path} {stage} {layer} {n} | "
                        "kubectl create -f -")  # fmt: skip
        note += [
            f"# watch:  pipeline top --job {name}  ·  pipeline pods --job {name}  ·  "
            f"pipeline inspect --job {name} INDEX",
            f"# then:   set job.resources from the peak; kubectl delete job -n {ns} {name}",
        ]
        if chunks:
            note += [f"# pod {i}: chunk {c}" for i, c in enumerate(
                sample_chunks(cfg, stage, layer, n))]  # fmt: skip
        click.echo("\n".join(note), err=True)
