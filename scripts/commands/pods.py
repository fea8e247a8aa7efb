"""`pipeline pods`, `events` and `top`: a layer's Job as the cluster sees it
(docs/architecture.md#what-the-predecessor-offered).
Its pods (why Pending, exit codes), the events of the Job and its pods, and live usage.

They only READ the cluster (scripts.cluster_access)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import RenderableType
from rich.table import Table

from adapters.wiring import cli_services
from scripts import cluster_access
from scripts.cluster_access import cluster_errors
from scripts.layer_target import Target, resolve_target
from scripts.options import JOB_OPTION, JSON_OPTION, ONCE_OPTION, TARGET, interval_option
from scripts.views.fleet import fleet_view
from scripts.views.terminal import console, live, span, titled_table, when
from shared.ports.cluster import (
    ClusterReader,
    JobStatus,
    MetricsUnavailableError,
    PodInfo,
    PodUsage,
)
from shared.views.fleet import FleetSummary, PodSample, count_oom, summarize

event_time = cli_services().event_time  # Kubernetes events' time, through the wiring

EPOCH = datetime.min.replace(tzinfo=UTC)  # sorts pods and events of unknown time first


def pod_runtime(pod: PodInfo, now: datetime) -> float | None:
    """Seconds the pod has run (until now if it still runs); None if it never started."""
    return None if pod.started is None else ((pod.finished or now) - pod.started).total_seconds()


# -- pods and events -----------------------------------------------------------------------------


def all_events(cluster: ClusterReader, job: str) -> list[dict[str, Any]]:
    events = list(cluster.job_events(job)) + list(cluster.pod_events(job))
    return sorted(events, key=event_time)


def scheduling_messages(cluster: ClusterReader, job: str) -> dict[str, str]:
    """Pod name -> the scheduler's latest word on it (why it is Pending)."""
    out: dict[str, str] = {}
    for e in all_events(cluster, job):
        obj = e.get("involvedObject") or {}
        if obj.get("kind") == "Pod" and e.get("reason") == "FailedScheduling":
            out[obj.get("name", "")] = e.get("message", "")
    return out


def pods_table(cluster: ClusterReader, target: Target, phase: str | None = None) -> Table:
    now = datetime.now(UTC)
    pods = sorted(cluster.list_pods(target.job), key=lambda p: (p.index, p.created or EPOCH))
    if phase:
        pods = [p for p in pods if p.phase.lower() == phase.lower()]
    pending = any(p.phase == "Pending" for p in pods)
    why = scheduling_messages(cluster, target.job) if pending else {}
    table = titled_table(
        f"pods of job {target.job}: {len(pods)}",
        ("index", "pod", "phase", "node", "reason", "started", "runtime", "exit"),
    )
    for p in pods:
        reason = p.reason or ""
        if p.phase == "Pending" and why.get(p.name):
            reason = f"{reason}: {why[p.name]}" if reason else why[p.name]
        exit_code = "" if p.exit_code is None else str(p.exit_code)
        started, runtime = when(p.started), span(pod_runtime(p, now))
        table.add_row(str(p.index), p.name, p.phase, p.node, reason, started, runtime, exit_code)
    return table


def events_table(cluster: ClusterReader, target: Target) -> Table:
    events = all_events(cluster, target.job)
    table = titled_table(
        f"events of job {target.job} and its pods: {len(events)}",
        ("time", "type", "reason", "object", "message"),
    )
    for e in events:
        obj = e.get("involvedObject") or {}
        what = "job" if obj.get("kind") == "Job" else f"{obj.get('kind', '?')}/{obj.get('name')}"
        count = f" (x{e['count']})" if (e.get("count") or 1) > 1 else ""
        message = f"{e.get('message', '')}{count}"
        table.add_row(when(event_time(e)), e.get("type", ""), e.get("reason", ""), what, message)
    return table


# -- top -----------------------------------------------------------------------------------------


def pod_usage(
    cluster: ClusterReader, job: str, pods: list[PodInfo]
) -> tuple[dict[str, PodUsage], str]:
    """Usage of the running pods by name, and a note when it is not (all) available."""
    running = [p for p in pods if p.phase == "Running"]
    if not running:
        return {}, ""
    try:
        usage = cluster.pod_usage(job)
    except MetricsUnavailableError as e:
        return {}, f"usage unavailable: {e}"
    missing = len(running) - sum(p.name in usage for p in running)
    return usage, (f"{missing} running pod(s) have no metrics sample yet" if missing else "")


def _pct(used: float, request: float) -> str:
    return f"{100 * used / request:.0f}%" if request else ""


def _share(used: float, request: float) -> float:
    return used / request if request else 0


def top_table(cluster: ClusterReader, target: Target) -> Table:
    pods = [p for p in cluster.list_pods(target.job) if p.phase in ("Running", "Pending")]
    pods.sort(key=lambda p: (p.index, p.created or EPOCH))
    usage, note = pod_usage(cluster, target.job, pods)
    table = titled_table(
        f"usage vs request, job {target.job} ({when(datetime.now(UTC))})",
        ("index", "pod", "phase", "cpu", "cpu req", "cpu %", "mem GiB", "mem req", "mem %"),
    )
    peak_cpu = peak_mem = peak_cpu_share = peak_mem_share = 0.0
    for p in pods:
        cpu = cpu_pct = mem = mem_pct = ""
        u = usage.get(p.name)
        if u is not None:
            cpu, cpu_pct = f"{u.cpu:.2f}", _pct(u.cpu, p.cpu_request)
            mem, mem_pct = f"{u.memory_gib:.2f}", _pct(u.memory_gib, p.memory_request_gib)
            peak_cpu, peak_mem = max(peak_cpu, u.cpu), max(peak_mem, u.memory_gib)
            peak_cpu_share = max(peak_cpu_share, _share(u.cpu, p.cpu_request))
            peak_mem_share = max(peak_mem_share, _share(u.memory_gib, p.memory_request_gib))
        cpu_req, mem_req = f"{p.cpu_request:g}", f"{p.memory_request_gib:g}"
        table.add_row(str(p.index), p.name, p.phase, cpu, cpu_req, cpu_pct, mem, mem_req, mem_pct)
    notes = [note] if note else []
    if usage:
        notes.append(
            f"peak: {peak_cpu:.2f} vCPU ({100 * peak_cpu_share:.0f}% of request), "
            f"{peak_mem:.2f} GiB ({100 * peak_mem_share:.0f}%)"
        )
    if not pods:
        notes.append("no running or pending pods")
    table.caption, table.caption_justify = " · ".join(notes), "left"
    return table


# -- commands ------------------------------------------------------------------------------------


@click.command()
@click.argument("args", nargs=-1, metavar=TARGET)
@JOB_OPTION
@click.option(
    "--phase",
    type=click.Choice(["Pending", "Running", "Succeeded", "Failed"], case_sensitive=False),
    default=None,
    help="Only pods in this phase.",
)
def pods(args: tuple[str, ...], job: str | None, phase: str | None) -> None:
    """The layer's pods: index, phase, node, reason (why Pending), started, runtime, exit.
    LAYER 0 (or `setup`): the stage's setup pass's pod."""
    target, _ = resolve_target(args, job, 0, need_job=True)
    with cluster_errors():
        cluster = cluster_access.read_cluster(target.namespace)
        console().print(pods_table(cluster, target, phase))


@click.command()
@click.argument("args", nargs=-1, metavar=TARGET)
@JOB_OPTION
def events(args: tuple[str, ...], job: str | None) -> None:
    """The layer's Job events and its pods' (scheduling, scale-up, failures), oldest first.
    LAYER 0 (or `setup`): the stage's setup pass's."""
    target, _ = resolve_target(args, job, 0, need_job=True)
    with cluster_errors():
        cluster = cluster_access.read_cluster(target.namespace)
        console().print(events_table(cluster, target))


def fleet_of(cluster: ClusterReader, job: str) -> tuple[FleetSummary, list[PodInfo], str]:
    """The Job's running pods summarised (usage against request), its pods, and a note."""
    pods = cluster.list_pods(job)
    running = [p for p in pods if p.phase == "Running"]
    usage, note = pod_usage(cluster, job, running)
    samples = [
        PodSample(p.name, p.index, u.cpu, p.cpu_request, u.memory_gib, p.memory_request_gib)
        for p in running
        if (u := usage.get(p.name)) is not None
    ]
    summary = summarize(samples, oom_kills=count_oom(p.reason for p in pods))
    return summary, pods, note


@click.command()
@click.argument("args", nargs=-1, metavar=TARGET)
@JOB_OPTION
@ONCE_OPTION
@interval_option(5.0)
@JSON_OPTION
@click.option("--pods", "per_pod", is_flag=True, help="One row per pod instead of the fleet.")
def top(
    args: tuple[str, ...], job: str | None, once: bool, interval: float, as_json: bool,
    per_pod: bool,
) -> None:  # fmt: skip
    """A Job's fleet live until the Job finishes: CPU and memory as a share of the request
    (p10/p50/p90/p99/max), pods over 90 %, OOM kills, and the highest, middle and lowest
    pods, in a fixed height at any fleet size (GKE: the metrics API; local: /proc). `--pods`:
    one row per pod. A finished Job has no pod to measure: `top` says how it ended and
    exits."""
    target, _ = resolve_target(args, job, 0, need_job=True)
    with cluster_errors():
        cluster = cluster_access.read_cluster(target.namespace)
        if as_json:
            summary, pods, note = fleet_of(cluster, target.job)
            doc = {"job": target.job, "note": note, **asdict(summary)}
            click.echo(json.dumps(doc, indent=2, default=str))
            return
        state = job_state(cluster, target.job)
        if state.finished:  # no pod left to measure: say so, and what to read instead
            click.echo(finished_line(target, state))
            return
        ended: list[JobStatus] = []  # the Job's status once it has finished

        def render() -> RenderableType:
            state = job_state(cluster, target.job)
            ended[:] = [state] if state.finished else []
            if per_pod:
                return top_table(cluster, target)
            summary, pods, note = fleet_of(cluster, target.job)
            return fleet_view(target.job, summary, pods, note, datetime.now(UTC))

        live(render, once, interval, until=lambda: bool(ended))
        if ended:
            click.echo(finished_line(target, ended[0]))


def job_state(cluster: ClusterReader, name: str) -> JobStatus:
    """The Job's status; LookupError when the cluster has no such Job."""
    state = cluster.get_job(name)
    if state is None:
        raise LookupError(f"no Job {name!r} in the cluster (deleted, or not created yet)")
    return state


def finished_line(target: Target, state: JobStatus) -> str:
    """What `top` says of a Job that has finished: how it ended, and where its pods and usage
    are to be read."""
    how = state.condition if not state.reason else f"{state.condition} ({state.reason})"
    at = f" at {when(state.completion_time)} UTC" if state.completion_time else ""
    if target.run is None or target.ls is None:
        return (
            f"job {state.name} finished: {how}{at}; no pod left to measure "
            f"(its pods: `pipeline pods --job {state.name}`)"
        )
    run, ls = target.run.run_id, target.ls
    return (
        f"{ls.key} of run {run} finished: job {state.name} {how}{at}; no pod left to measure "
        f"(its pods: `pipeline pods {run} {ls.stage} {ls.layer}`; its usage and cost: "
        f"`pipeline run {run}`)"
    )


COMMANDS = (pods, events, top)
