"""`pipeline inspect`: why a layer failed (docs/architecture.md#what-the-predecessor-offered). A
layer's failed indexes, retries and alerts; with INDEX, that batch's pods, its failing chunk and
the latest pod's log tail. A stage's setup pass (LAYER 0): its pod, the error, the log tail and
the fix at once (it has one pod).

It only READS the cluster (scripts.cluster_access) and Firestore."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console

from scripts import cluster_access
from scripts.cluster_access import cluster_errors
from scripts.commands.pods import EPOCH, pod_runtime
from scripts.layer_target import Target, parse_int, resolve_target
from scripts.options import JOB_OPTION, TARGET
from scripts.setup_view import layer_alerts, setup_error, setup_fix, setup_heading
from scripts.views.terminal import console, span, titled_table, when
from scripts.worker_logs import failing_chunk, render_log
from shared.control.batch_failures import Attempt, BatchFailure, classify
from shared.model import grid, intervals
from shared.model.state import SETUP_LAYER


def _alerts_of(target: Target) -> list[Any]:
    assert target.run is not None
    if target.setup is not None:
        return layer_alerts(target.run.run_id, target.setup.stage, SETUP_LAYER)
    assert target.ls is not None
    return layer_alerts(target.run.run_id, target.ls.stage, target.ls.layer)


def _alert_summary(body: dict[str, Any]) -> str:
    keys = ("indexes", "reason", "failed_indexes", "no_progress_s", "advance", "status", "fix")
    return "; ".join(f"{k} {body[k]}" for k in keys if body.get(k) not in (None, "", []))


def _inspect_job(out: Console, job: str) -> None:
    """An untracked Job (no INDEX): its failed indexes, as the cluster reports them."""
    with cluster_errors():
        status = cluster_access.read_cluster().get_job(job)
    if status is None:
        raise LookupError(f"no job {job!r} in the cluster")
    failed = status.failed_indexes
    out.print(
        f"job {status.name}: failed indexes {failed or 'none'} ({intervals.count(failed)})",
        markup=False,
    )


def _inspect_layer(out: Console, target: Target, limit: int) -> None:
    ls, run = target.ls, target.run
    assert ls is not None and run is not None
    failed = ls.progress.failed_indexes
    out.print(
        f"{ls.stage} L{ls.layer} of run {run.run_id}: {ls.phase}"
        + (f" ({ls.failure_reason})" if ls.failure_reason else "")
        + (f", job {ls.job.name}" if ls.job.name else "")
    )
    out.print(
        f"failed indexes: {failed or 'none'} ({intervals.count(failed)}) · retries (failed pod "
        f"attempts): {ls.pods.failed} · preempted: {ls.pods.preempted}",
        markup=False,
    )
    indexes = intervals.parse(failed)
    if indexes:
        _, _, size = target.geometry()
        table = titled_table(None, ("index", "first chunk", "chunks"))
        for index in indexes[:limit]:
            table.add_row(str(index), str(target.batch_chunks(index)[0]), str(size))
        out.print(table)
        if len(indexes) > limit:
            out.print(f"... and {len(indexes) - limit} more (--limit)")
        hint = f"pipeline inspect {run.run_id} {ls.stage} {ls.layer} {indexes[0]}"
        out.print(f"next: `{hint}` for a batch's pods, log and traceback", markup=False)
    alerts = _alerts_of(target)
    if alerts:
        table = titled_table("alerts", ("time", "alert", "details"))
        for a in alerts:
            table.add_row(when(a.created_at), a.kind, _alert_summary(a.body))
        out.print(table)


def _inspect_setup(out: Console, target: Target, tail: int) -> None:
    """A stage's setup pass: its state, its one pod (attempts, the error it ended with, the
    log tail with the traceback), its alerts and the fix."""
    run, setup = target.run, target.setup
    assert run is not None and setup is not None
    out.print(setup_heading(run, setup), markup=False)
    if setup.job_name:
        with cluster_errors():
            cluster = cluster_access.read_cluster(target.namespace)
            _inspect_index(out, cluster, target, 0, tail, chunks=False)
    alerts = _alerts_of(target)
    if alerts:
        table = titled_table("alerts", ("time", "alert", "details"))
        for a in alerts:
            table.add_row(when(a.created_at), a.kind, _alert_summary(a.body))
        out.print(table)
    fix = setup_fix(run, setup, alerts)
    if fix:
        out.print(f"fix: {fix}", markup=False)


def _check_index(target: Target, index: int) -> None:
    """A layer's INDEX must be one of its batches, and the layer must have a Job."""
    if target.ls is None:
        return
    if not target.job:
        raise LookupError(f"{target.ls.key} is {target.ls.phase}: it has no Job yet")
    shape, _, size = target.geometry()
    n = grid.num_batches(shape, size)
    if not 0 <= index < n:
        raise click.BadParameter(f"INDEX {index}: this layer's batches are 0..{n - 1}")


def _inspect_index(
    out: Console, cluster: Any, target: Target, index: int, tail: int, chunks: bool
) -> None:
    now = datetime.now(UTC)
    coords: list[tuple[int, ...]] = []
    head = f"job {target.job} batch {index}"
    if target.setup is not None:
        head = f"{target.name} pod (job {target.job}: one pod, index 0)"
    elif target.ls is not None:
        assert target.run is not None
        coords = target.batch_chunks(index)
        head = (
            f"{target.ls.stage} L{target.ls.layer} batch {index} of run {target.run.run_id} "
            f"(job {target.job}): {len(coords)} chunks, first {coords[0]}"
        )
        if index in intervals.parse(target.ls.progress.failed_indexes):
            head += " · FAILED index"
    out.print(head, markup=False)
    pods = sorted(cluster.list_pods(target.job, index), key=lambda p: p.created or EPOCH)
    table = titled_table(
        "pods (attempts)",
        ("attempt", "pod", "phase", "exit", "reason", "node", "started", "runtime"),
    )
    for n, p in enumerate(pods, 1):
        exit_code = "" if p.exit_code is None else str(p.exit_code)
        started, runtime = when(p.started), span(pod_runtime(p, now))
        table.add_row(str(n), p.name, p.phase, exit_code, p.reason or "", p.node, started, runtime)
    log_text, source = "", ""
    if pods:
        out.print(table)
        log_text, source = cluster.pod_log(pods[-1].name, tail), f"pod {pods[-1].name}"
        verdict = _attempts_verdict(cluster, pods, tail)
        if verdict is not None:
            out.print(verdict, markup=False)
    else:
        out.print("no pods of this index in the cluster (not started yet, or removed)")
        if target.run is not None:
            log_text, source = _alert_log_tail(target, index)
    found = None if target.setup is not None else failing_chunk(log_text)
    error = setup_error(log_text) if target.setup is not None else ""
    if error:
        out.print(f"error: {error}", markup=False)
    if found:
        out.print(
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


def _attempts_verdict(cluster: Any, pods: list[Any], tail: int) -> str | None:
    """A line saying how the index's failed attempts failed, when there are two or more:
    the same way every time (bad input where a stage retries every exception instead of
    exiting 42: shared.control.batch_failures) or not. An unreadable log reads as empty."""
    failed = [p for p in pods if p.phase == "Failed"]
    if len(failed) < 2:
        return None
    attempts = []
    for p in failed:
        try:
            text = cluster.pod_log(p.name, tail)
        except Exception:  # noqa: BLE001 - a pod gone leaves its attempt unread
            text = ""
        attempts.append(Attempt(p.exit_code, text))
    verdict = classify(attempts)
    if verdict.failure is BatchFailure.SAME_EVERY_ATTEMPT:
        return (
            f"every attempt ({verdict.attempts}) failed the same way, exit "
            f"{verdict.exit_codes[0]}: {verdict.error} (bad input is likely: retrying did not "
            "help)"
        )
    return f"the {verdict.attempts} failed attempts failed differently ({verdict.failure.value})"


def _alert_log_tail(target: Target, index: int) -> tuple[str, str]:
    """A failed index's log tail as its alert recorded it (pods may be gone since)."""
    for alert in reversed(_alerts_of(target)):
        for batch in alert.body.get("batches") or []:
            if batch.get("index") == index and batch.get("log_tail"):
                return batch["log_tail"], f"the {alert.kind} alert of {when(alert.created_at)}"
    return "", ""


@click.command()
@click.argument("args", nargs=-1, metavar=f"{TARGET} [INDEX]")
@JOB_OPTION
@click.option(
    "--tail",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Log lines of the index's latest pod.",
)
@click.option("--chunks", is_flag=True, help="List the batch's chunks too.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Failed indexes to list.",
)
def inspect(args: tuple[str, ...], job: str | None, tail: int, chunks: bool, limit: int) -> None:
    """A layer's failed indexes (each with its batch's first chunk), retries and alerts;
    with INDEX, that batch's pods, the failing chunk and the latest pod's log tail with
    its traceback. LAYER 0 (or `setup`) is the stage's setup pass: its pod's attempts, the
    error it ended with, the log tail with the traceback, its alerts and the fix.
    `--job NAME INDEX` inspects an untracked Job (a sample)."""
    target, rest = resolve_target(args, job, 1, need_job=False)
    if target.setup is not None:
        if rest and parse_int(rest[0], "INDEX") != 0:
            raise click.BadParameter(f"INDEX {rest[0]}: a setup pass has one pod, index 0")
        _inspect_setup(console(), target, tail)
        return
    if not rest:
        if target.ls is None:
            _inspect_job(console(), target.job)
        else:
            _inspect_layer(console(), target, limit)
        return
    index = parse_int(rest[0], "INDEX")
    _check_index(target, index)
    with cluster_errors():
        cluster = cluster_access.read_cluster(target.namespace)
        _inspect_index(console(), cluster, target, index, tail, chunks)


COMMANDS = (inspect,)
