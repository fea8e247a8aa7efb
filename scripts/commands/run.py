"""Run commands: start a build, watch it, and the operator's levers on it."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import click

from scripts import cluster_access
from scripts.layer_target import run_config
from scripts.options import (
    CONFIG_OPTION,
    JSON_OPTION,
    ONCE_OPTION,
    interval_option,
    layer_arguments,
)
from scripts.run_progress import as_json as as_json_doc
from scripts.run_progress import gather
from scripts.services import connect, operator_name
from scripts.views.status import MAX_ROWS, status_view
from scripts.views.terminal import console, live
from shared import operator_actions as ops
from shared.build_plan import new_run
from shared.cluster import Cluster, ClusterError
from shared.config import load_config
from shared.manifest import validate_config_renders
from shared.progress import RunProgress
from shared.stages import default_stages
from shared.state import RunState

ADVANCE = click.Choice(["manual", "approve", "auto"])


def _now() -> datetime:
    return datetime.now(UTC)


def start_run(
    cfg_path: str,
    run_id: str | None,
    stages: list[str] | None,
    advance: str | None,
    budget: float | None,
) -> RunState:
    """Validate the config, store a new run and kick the controller."""
    cfg = load_config(cfg_path)
    validate_config_renders(cfg)
    services = connect()
    run = new_run(
        cfg,
        run_id or f"{cfg.graph_id}-{_now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}",
        stages or default_stages(cfg),
        advance or cfg.controller.advance,
        _now(),
        budget,
    )
    services.store.create_run(run)
    services.kick(run.run_id, "start", operator_name())
    return run


def _apply(run_id: str, action: str, mutate) -> RunState:  # noqa: ANN001 - a RunState mutator
    services = connect()
    run = services.store.update_run(run_id, mutate)
    error = services.try_kick(run_id, action)
    if error is not None:
        click.echo(
            f"warning: recorded, but the kick failed ({error}); the controller applies it on "
            "its next tick, within a minute",
            err=True,
        )
    return run


@click.command()
@CONFIG_OPTION
def setup(config_path: str) -> None:
    """Create the graph's Bigtable table (lock and done rows live there), if missing, and the
    Secret `secret_name` of the pods' credential files (`secret_files`, a placeholder
    cave-secret.json where none is given)."""
    from scripts.secret_files import apply_secret
    from shared.adapters.bigtable.chunk_ledger import ensure_table

    cfg = load_config(config_path)
    connect()  # picks up a running local stack's emulator addresses
    ensure_table(cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance)
    click.echo(f"table {cfg.graph_id} ready in {cfg.bigtable.project}/{cfg.bigtable.instance}")
    click.echo(apply_secret(cfg))


@click.command()
@CONFIG_OPTION
@click.option("--run-id", default=None, help="Default: <graph>-<time>-<random>.")
@click.option("--stages", default=None, help="Comma list; default: the dataset's DAG.")
@click.option("--advance", type=ADVANCE, default=None, help="Default: controller.advance.")
@click.option("--budget", type=float, default=None, help="Pause and alert at this USD.")
def start(
    config_path: str,
    run_id: str | None,
    stages: str | None,
    advance: str | None,
    budget: float | None,
) -> None:
    """Start a build; the controller runs it from here, no terminal needed."""
    run = start_run(config_path, run_id, stages.split(",") if stages else None, advance, budget)
    click.echo(f"started run {run.run_id} ({', '.join(run.stages)}; advance {run.advance})")


@click.command()
@click.argument("run_id")
@click.argument("stage")
@click.argument("layers", nargs=-1, type=int)
def approve(run_id: str, stage: str, layers: tuple[int, ...]) -> None:
    """Approve LAYERS of STAGE (default: every layer not yet started)."""
    keys: list[str] = []
    _apply(
        run_id,
        "approve",
        lambda run: keys.extend(ops.approve(run, stage, list(layers), operator_name(), _now())),
    )
    click.echo(f"approved {', '.join(keys) or 'nothing new'} in {run_id}")


@click.command()
@click.argument("run_id")
def pause(run_id: str) -> None:
    """Suspend every unfinished Job of the run (finished indexes are kept)."""
    _apply(run_id, "pause", ops.pause)
    click.echo(f"pausing {run_id}: its Jobs are suspended on the next reconcile")


@click.command()
@click.argument("run_id")
def resume(run_id: str) -> None:
    """Resume a paused run from its stored state."""
    _apply(run_id, "resume", ops.resume)
    click.echo(f"resuming {run_id}")


@click.command()
@layer_arguments
@click.argument("parallelism", type=int)
def scale(run_id: str, stage: str, layer: int, parallelism: int) -> None:
    """Pin a layer's parallelism (0 hands it back to the ramp)."""
    _apply(run_id, "scale", lambda run: ops.scale(run, stage, layer, parallelism or None))
    click.echo(f"{run_id} {stage} L{layer}: parallelism {parallelism or 'from the ramp'}")


@click.command()
@layer_arguments
def submit(run_id: str, stage: str, layer: int) -> None:
    """Re-submit a failed layer as a new Job; chunks already done are skipped. Layer 0 re-runs
    the stage's failed setup pass."""
    _apply(run_id, "submit", lambda run: ops.resubmit(run, stage, layer, operator_name(), _now()))
    click.echo(f"re-submitted {stage} L{layer} of {run_id}")


@click.command()
@layer_arguments
def delete(run_id: str, stage: str, layer: int) -> None:
    """Delete a layer's Job and pods; the layer stops as failed (`submit` redoes it)."""
    _apply(run_id, "delete", lambda run: ops.cancel(run, stage, layer, operator_name(), _now()))
    click.echo(f"deleting the Job of {stage} L{layer} in {run_id}")


def _status_cluster(run: RunState) -> tuple[Cluster | None, str]:
    """The cluster to read pods from, or None and why not (status works without it)."""
    try:
        return cluster_access.read_cluster(run_config(run).namespace), ""
    except ClusterError as e:
        return None, f"cluster not read: {str(e).splitlines()[0][:160]}"


@click.command()
@click.argument("run_id")
@ONCE_OPTION
@interval_option(2.0)
@JSON_OPTION
@click.option(
    "--rows", type=click.IntRange(min=3), default=MAX_ROWS, show_default=True, help="Layer rows."
)
def status(run_id: str, once: bool, interval: float, as_json: bool, rows: int) -> None:
    """A run's progress until Ctrl-C (or --once): per layer chunks done / total, active and
    ready pods, retries, failed indexes, OOM kills, parallelism against the ramp, approval,
    elapsed, chunks/min, ETA and cost so far; the run's totals, spend against budget, the
    cluster's nodes and requests, and what the waiting layers wait on."""
    store = connect().store
    run = store.load_run(run_id)
    cluster, why = _status_cluster(run)

    def snapshot() -> tuple[RunProgress, str]:
        progress, note = gather(store.load_run(run_id), _now(), cluster)
        return progress, "; ".join(n for n in (why, note) if n)

    if as_json:
        click.echo(json.dumps(as_json_doc(snapshot()[0]), default=str, indent=2))
        return
    live(lambda: status_view(*snapshot(), max_rows=rows), once, interval, console(100))


COMMANDS = (setup, start, approve, pause, resume, scale, submit, delete, status)
