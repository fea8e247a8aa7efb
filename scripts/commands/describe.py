"""`pipeline describe RUN STAGE LAYER`: a layer's Job in one screen (counts, conditions, each
unfinished pod's state and reason, the last warning events), and `pipeline run RUN`: where a
run's time and money went, by stage and layer. Both only READ Firestore and the cluster."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console

from adapters.wiring import cli_services
from scripts import cluster_access
from scripts.bill_read import default_monitor, run_bill, run_projected_bill
from scripts.cluster_access import cluster_errors
from scripts.commands.pods import EPOCH, all_events, pod_runtime, scheduling_messages
from scripts.cost_report import SETUP, cost_report
from scripts.layer_target import Target, resolve_target, run_config
from scripts.money_format import usd
from scripts.options import JOB_OPTION, JSON_OPTION, TARGET
from scripts.report_data import pod_records_by_layer
from scripts.run_progress import gather, layer_size
from scripts.services import connect
from scripts.setup_view import layer_alerts, setup_error, setup_fix
from scripts.views.bill_table import bill_table
from scripts.views.status import forecast_cost, forecast_eta
from scripts.views.terminal import console, span, titled_table, when
from scripts.views.timeline import timeline_table
from shared.model import intervals
from shared.model.phase import Phase
from shared.model.state import SETUP_LAYER, RunState
from shared.ports.cluster import ClusterReader, PodInfo
from shared.views.build_timeline import build_timeline
from shared.views.progress import chunks_done

event_time = cli_services().event_time  # Kubernetes events' time, through the wiring

LAST_WARNINGS = 5
MAX_PODS = 12  # unfinished pods listed (the rest are counted)
SETUP_LOG_LINES = 200  # of a setup pod's log, for the error it ended with


def _describe(out: Console, cluster: ClusterReader, target: Target) -> None:
    job = cluster.get_job(target.job)
    if job is None:
        raise LookupError(f"no Job {target.job!r} in the cluster (deleted, or not created yet)")
    head = f"job {job.name}"
    if target.setup is not None and target.run is not None:
        head = f"{target.name} of run {target.run.run_id} ({target.setup.phase}) · {head}"
    elif target.ls is not None and target.run is not None:
        ls = target.ls
        head = f"{ls.key} of run {target.run.run_id} ({ls.phase}) · {head}"
    out.print(head, markup=False)
    state = job.condition or ("suspended" if job.suspended else "running")
    out.print(
        f"state {state}{f' ({job.reason})' if job.reason else ''} · completions "
        f"{job.completions} · parallelism {job.parallelism} · active {job.active} · ready "
        f"{job.ready} · succeeded {job.succeeded} · failed pods {job.failed}",
        markup=False,
    )
    out.print(
        f"completed indexes {intervals.count(job.completed_indexes)}/{job.completions} · "
        f"failed indexes {job.failed_indexes or 'none'} · started {when(job.start_time)}"
        + (f" · finished {when(job.completion_time)}" if job.completion_time else ""),
        markup=False,
    )
    now = datetime.now(UTC)
    pods = [p for p in cluster.list_pods(target.job) if p.phase in ("Pending", "Running")]
    pods.sort(key=lambda p: (p.phase != "Pending", p.index, p.created or EPOCH))
    why = (
        scheduling_messages(cluster, target.job) if any(p.phase == "Pending" for p in pods) else {}
    )
    _unfinished_pods(out, pods, why, now)
    _warnings(out, [e for e in all_events(cluster, target.job) if e.get("type") == "Warning"])
    if target.setup is not None:
        _setup_outcome(out, cluster, target)


def _unfinished_pods(out: Console, pods: list[PodInfo], why: dict[str, str], now: datetime) -> None:
    """The pending and running pods (why Pending), or a line saying there are none."""
    if not pods:
        out.print("unfinished pods: none", markup=False)
        return
    table = titled_table(
        f"unfinished pods: {len(pods)}", ("index", "pod", "phase", "node", "runtime", "reason")
    )
    for p in pods[:MAX_PODS]:
        reason = " ".join(x for x in (p.reason or "", why.get(p.name, "")) if x)
        table.add_row(str(p.index), p.name, p.phase, p.node, span(pod_runtime(p, now)), reason)
    if len(pods) > MAX_PODS:
        table.caption = f"... and {len(pods) - MAX_PODS} more (`pipeline pods`)"
        table.caption_justify = "left"
    out.print(table)


def _warnings(out: Console, warnings: list[dict[str, Any]]) -> None:
    """The last warning events, or a line saying there are none."""
    if not warnings:
        out.print("warning events: none", markup=False)
        return
    events = titled_table(
        f"last warning events ({len(warnings)} in all)", ("time", "reason", "object", "message")
    )
    for e in warnings[-LAST_WARNINGS:]:
        obj = (e.get("involvedObject") or {}).get("name", "")
        events.add_row(when(event_time(e)), e.get("reason", ""), obj, e.get("message", ""))
    out.print(events)


def _setup_outcome(out: Console, cluster: ClusterReader, target: Target) -> None:
    """A setup pass's outcome under its Job: why it failed, the error its pod ended with, the
    fix, and where its log tail and traceback are."""
    run, setup = target.run, target.setup
    assert run is not None and setup is not None
    if setup.failure_reason:
        out.print(f"{setup.phase}: {setup.failure_reason}", markup=False)
    pods = sorted(cluster.list_pods(target.job, 0), key=lambda p: p.created or EPOCH)
    error = setup_error(cluster.pod_log(pods[-1].name, SETUP_LOG_LINES)) if pods else ""
    if error:
        out.print(f"error: {error}", markup=False)
    fix = setup_fix(run, setup, layer_alerts(run.run_id, setup.stage, SETUP_LAYER))
    if fix:
        out.print(f"fix: {fix}", markup=False)
    out.print(
        f"next: `pipeline inspect {run.run_id} {setup.stage} {SETUP_LAYER}` for the pod's log "
        "tail and traceback",
        markup=False,
    )


@click.command()
@click.argument("args", nargs=-1, metavar=TARGET)
@JOB_OPTION
def describe(args: tuple[str, ...], job: str | None) -> None:
    """A layer's Job in one screen: its counts and conditions, each unfinished pod's state and
    reason (why Pending), and the last warning events. LAYER 0 (or `setup`) is the stage's
    setup pass: its Job, then why it failed, the error its pod ended with and the fix."""
    target, _ = resolve_target(args, job, 0, need_job=True)
    with cluster_errors():
        cluster = cluster_access.read_cluster(target.namespace)
        _describe(console(), cluster, target)


def breakdown(run: RunState, now: datetime) -> list[dict[str, Any]]:
    """Per stage, its setup pass (`"layer": "setup"`, if it ran) and then its layers: chunks,
    pods, retries, preemptions, vCPU-h, GiB-h, cost and wall time (the costs are
    `pipeline costs`' rows, so the stage subtotals agree)."""
    cfg = run_config(run)
    costs = {r["key"]: r for r in cost_report(run, now)["layers"]}
    rows = []
    for stage in run.stages:
        setup = run.setups.get(stage)
        if setup is not None and f"{stage}-{SETUP}" in costs:
            c = costs[f"{stage}-{SETUP}"]
            rows.append(
                {**_money(c), "stage": stage, "layer": SETUP, "key": c["key"],
                 "phase": setup.phase, "chunks_done": 0, "chunks": 0, "hung": 0,
                 "wall_s": setup.span_s(now)}
            )  # fmt: skip
        for ls in (ls for ls in run.ordered_layers() if ls.stage == stage):
            size = layer_size(cfg, ls.stage, ls.layer)
            done = (
                size.chunks
                if ls.phase == Phase.SUCCEEDED
                else chunks_done(ls.progress.completed_indexes, size)
            )
            wall = None
            if ls.timing.submitted_at is not None:
                wall = ((ls.timing.finished_at or now) - ls.timing.submitted_at).total_seconds()
            rows.append(
                {**_money(costs.get(ls.key, {})), "stage": ls.stage, "layer": ls.layer,
                 "key": ls.key, "phase": ls.phase, "chunks_done": done, "chunks": size.chunks,
                 "hung": ls.faults.hung, "wall_s": wall}
            )  # fmt: skip
    return rows


def _money(cost_row: dict[str, Any]) -> dict[str, Any]:
    """Pods, retries, preemptions, vCPU-h, GiB-h and USD from a `pipeline costs` row (0s for
    a layer not submitted)."""
    return {
        "pods": cost_row.get("pods", 0),
        "retries": cost_row.get("retries", 0),
        "preemptions": cost_row.get("preempted", 0),
        "vcpu_hours": cost_row.get("vcpu_hours", 0.0),
        "gib_hours": cost_row.get("gib_hours", 0.0),
        "usd": cost_row.get("usd", 0.0),
    }


@click.command("run")
@click.argument("run_id")
@click.option(
    "--timeline",
    is_flag=True,
    help="Where the wall time went instead: per layer, approval wait, advance, start-up, "
    "compute, tail and the Job's completion; the run's wall time as their sum.",
)
@JSON_OPTION
def run_breakdown(run_id: str, timeline: bool, as_json: bool) -> None:
    """Where a run's time and money went: by stage and layer, chunks, pods, retries,
    preemptions, vCPU-h, GiB-h, cost (estimate) and wall time, with stage subtotals; while it
    runs, the forecast ETA and projected cost of each layer and of the run."""
    now = datetime.now(UTC)
    store = connect().store
    run = store.load_run(run_id)
    if timeline:
        tl = build_timeline(run, pod_records_by_layer(store, run), now)
        if as_json:
            click.echo(json.dumps({"run_id": run_id, **tl.to_json()}, indent=2))
        else:
            console().print(timeline_table(run_id, tl))
        return
    history = store.config_versions(run_id)  # `pipeline apply`'s and `rightsize`'s versions
    rows = breakdown(run, now)
    progress, _ = gather(run, now, None)  # the forecast, as `pipeline status` shows it
    forecast = {lp.key: lp for lp in progress.layers}
    for r in rows:
        lp = forecast.get(r["key"])  # none for a setup pass
        r["eta_s"] = lp.eta_s if lp is not None else None
        r["projected_usd"] = lp.projected_usd if lp is not None else None
    bill = run_bill(run_config(run), run, now, default_monitor())  # the whole bill
    projected = run_projected_bill(run_config(run), run, now, bill)
    if as_json:
        doc = {"run_id": run_id, "status": run.status, "layers": rows, "bill": bill.as_dict()}
        if projected is not None:
            doc["projected_bill"] = projected.as_dict()
        doc.update(eta_s=progress.eta_s, eta_basis=progress.eta_basis)
        doc["projected_usd"] = progress.projected_usd
        doc["assumed_chunk_s"] = progress.assumed_chunk_s
        doc["config_versions"] = history
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    table = titled_table(
        f"run {run_id} · {run.graph_id} · {run.status} (cost: estimate)",
        ("stage", "layer", "phase", "chunks", "pods", "retries", "preempt", "vCPU-h", "GiB-h",
         "USD", "wall"),
    )  # fmt: skip
    for stage in run.stages:
        mine = [r for r in rows if r["stage"] == stage]
        for r in mine:
            table.add_row(
                stage, str(r["layer"]), r["phase"],
                f"{r['chunks_done']}/{r['chunks']}" if r["layer"] != SETUP else "",
                str(r["pods"]), str(r["retries"]) + (f" ({r['hung']} hung)" if r["hung"] else ""),
                str(r["preemptions"]),
                f"{r['vcpu_hours']:.3f}", f"{r['gib_hours']:.3f}", usd(r["usd"]),
                span(r["wall_s"]),
            )  # fmt: skip
        total = {k: sum(r[k] for r in mine) for k in ("pods", "retries", "preemptions")}
        money = {k: sum(r[k] for r in mine) for k in ("vcpu_hours", "gib_hours", "usd")}
        table.add_row(
            f"[bold]{stage}[/]", "", "subtotal",
            f"{sum(r['chunks_done'] for r in mine)}/{sum(r['chunks'] for r in mine)}",
            str(total["pods"]), str(total["retries"]), str(total["preemptions"]),
            f"{money['vcpu_hours']:.3f}", f"{money['gib_hours']:.3f}",
            f"[bold]{usd(money['usd'])}[/]", "", end_section=True,
        )  # fmt: skip
    outlook = " · ".join(t for t in (forecast_eta(progress), forecast_cost(progress)) if t)
    if outlook:
        table.caption, table.caption_justify = f"forecast: {outlook}", "left"
    console().print(table)
    console().print(bill_table(run_id, bill, projected))
    for line in history_lines(history):
        console().print(line, markup=False, highlight=False)


def history_lines(versions: list[dict[str, Any]]) -> list[str]:
    """One line per config version of a run (`pipeline apply`'s, `job.rightsize: auto`'s):
    its number, who, when and the keys it changed."""
    out = []
    for v in versions:
        keys = ", ".join(f"{c['key']} {c['old']!r} -> {c['new']!r}" for c in v["changes"])
        at = v["at"].isoformat(timespec="seconds") if hasattr(v["at"], "isoformat") else v["at"]
        out.append(f"config v{v['version']} by {v['by']} at {at}: {keys}")
    return out


COMMANDS = (describe, run_breakdown)
