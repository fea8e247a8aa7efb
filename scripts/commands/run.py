"""Run commands: start a build, watch it, and the operator's levers on it."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import click
from rich.console import RenderableType

from scripts import cluster_access
from scripts.cave_register import register_with_cave
from scripts.layer_target import run_config
from scripts.options import (
    CANARY_OPTION,
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
from shared.config.config import ConfigError, PipelineConfig
from shared.config.config_files import load_config
from shared.config.stage_selection import default_stages
from shared.jobs.manifest import lock_scale_warning
from shared.jobs.render_check import validate_config_renders
from shared.model.state import RUN_ENDED, RunState
from shared.operate import config_versions, start_from
from shared.operate import operator_actions as ops
from shared.operate.cave_registration import Outcome, failure_alert
from shared.operate.dataset_changes import check_resubmit, recorded_fingerprint
from shared.ports.cluster import ClusterError, ClusterReader
from shared.ports.graph_table import GraphTable
from shared.reconcile.build_plan import new_run
from shared.views.progress import RunProgress, describe_start

ADVANCE = click.Choice(["manual", "approve", "auto"])


def _now() -> datetime:
    return datetime.now(UTC)


ROOT_CHECK_RUNS = 10  # the graph's newest ingest runs read for their root check


def start_run(
    cfg_path: str,
    run_id: str | None,
    stages: list[str] | None,
    advance: str | None,
    budget: float | None,
    force: bool = False,
    reason: str = "",
    from_layer: int | None = None,
    from_stage: str | None = None,
    canary: int | None = None,
) -> RunState:
    """Validate the config, store a new run and kick the controller. A second active run
    of the graph is refused unless `force` (then recorded on the run, with `reason`). With
    `from_layer` (or the config's `start_layers`) a stage starts mid-graph once the layer
    below is complete in the ledger, or, for a stage whose pods write no done markers, at
    once, recorded on the run as unverified. `canary` N: controller.canary_chunks for this
    run (docs/canary-and-rightsize.md)."""
    cfg = load_config(cfg_path)
    if canary is not None:
        ctl = cfg.controller.model_copy(update={"canary_chunks": canary})
        cfg = cfg.model_copy(update={"controller": ctl})
    validate_config_renders(cfg)
    warning = lock_scale_warning(cfg)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    services = connect()
    run = new_run(
        cfg,
        run_id or f"{cfg.graph_id}-{_now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}",
        stages or default_stages(cfg),
        advance or cfg.controller.advance,
        _now(),
        budget,
    )
    # Check, then create: two starts in the same second could both pass; the guard is for
    # the operator who forgot a run is still going, not a lock.
    others = services.store.runs_of_graph(cfg.graph_id)
    ops.guard_one_active(run, others, force, operator_name(), _now(), reason)
    if start_from.builds_on_ingest_only(run) and not force:
        # The guard's listing has no layers: load the graph's ingest runs, newest first.
        ingest = sorted(
            (r for r in others if "ingest" in r.stages),
            key=lambda r: r.created_at or start_from.EPOCH,
            reverse=True,
        )
        loaded = [services.store.load_run(r.run_id) for r in ingest[:ROOT_CHECK_RUNS]]
        start_from.check_root_check(run, loaded, force)
    for stage, first in start_from.start_layers(cfg, run, from_stage, from_layer).items():
        verified = start_from.needs_marker_check(cfg, stage)
        if verified:
            missing, total = _not_done(cfg, stage, first - 1)
            start_from.check_layer_done(stage, first - 1, total, missing)
        start_from.skip_below(run, stage, first, operator_name(), _now(), verified=verified)
    cave = register_with_cave(cfg)  # best effort: a failure is a warning and an alert
    services.store.create_run(run)
    if cave is not None:
        result, line, reg = cave
        if result is Outcome.FAILED:
            # Committed before the kick, so nothing else writes the run yet; the controller
            # publishes it with the run's other alerts.
            alert = failure_alert(run.run_id, run.graph_id, line, reg, _now())
            services.store.commit(run, run, alerts=[alert])
            click.echo(f"warning: {line}; {alert['fix']}", err=True)
        else:
            click.echo(line)
    services.kick(run.run_id, "start", operator_name())
    return run


def _not_done(cfg: PipelineConfig, stage: str, layer: int) -> tuple[list[int], int]:
    """The chunks of `layer` of `stage` not marked done in the graph's table, and how many
    chunks the layer has (one batched read per 10,000 chunks)."""
    from adapters.wiring import cli_services

    ids = list(start_from.layer_chunk_ids(cfg, stage, layer))
    done = cli_services().done_among(cfg, stage, ids)
    return [c for c in ids if c not in done], len(ids)


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
    """Create the Secret `secret_name` of the pods' credential files (`secret_files`, a
    placeholder cave-secret.json where none is given) and the Bigtable tables the
    configured stages need (`scripts.run_tables`): the graph's table if missing when ingest
    runs on our worker, and the tables a stage's plugin writes besides it (the demo's
    l2cache and meshing tables). An image-run ingest (`commands.ingest`) creates its own
    table with the graph's metadata in its setup pass, so the table is left to it
    (docs/setup-passes.md)."""
    from scripts.secret_files import apply_secret

    cfg = load_config(config_path)
    connect()  # picks up a running local stack's emulator addresses
    click.echo(_setup_table(cfg))
    for line in _setup_stage_tables(cfg):
        click.echo(line)
    click.echo(apply_secret(cfg))


def _setup_table(cfg: PipelineConfig) -> str:
    """Create the graph's table for our worker, or leave it to the image's ingest setup
    (saying what that setup will find)."""
    from adapters.wiring import cli_services
    from shared.config.stage_selection import image_owns_table

    project, instance = cfg.bigtable.project, cfg.bigtable.instance
    if not image_owns_table(cfg):
        cli_services().ensure_table(cfg.graph_id, project, instance)
        return f"table {cfg.graph_id} ready in {project}/{instance}"
    table = cli_services().graph_tables().read(cfg.graph_id, project, instance)
    note, warning = image_table_note(table, project, instance)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    return note


def _setup_stage_tables(cfg: PipelineConfig) -> list[str]:
    """Create the tables the configured stages' plugins write besides the graph's, if
    missing; a line for each."""
    from adapters.wiring import cli_services
    from scripts.run_tables import extra_tables

    ensure_table = cli_services().ensure_table

    project, instance = cfg.bigtable.project, cfg.bigtable.instance
    lines = []
    for table in extra_tables(cfg, default_stages(cfg)):
        ensure_table(table.table_id, project, instance)
        lines.append(f"table {table.table_id} ready in {project}/{instance} ({table.stage})")
    return lines


def image_table_note(table: GraphTable, project: str = "", instance: str = "") -> tuple[str, str]:
    """What `pipeline setup` says of the table an image's ingest setup will find: a line, and
    a warning ("" if none) when that setup will be refused."""
    from shared.ports.graph_table import TableState, delete_table_fix, describe

    found = describe(table, project, instance)
    if table.state is TableState.ABSENT:
        return f"{found}: the ingest setup pass creates it with the graph's metadata", ""
    if table.state is TableState.METADATA:
        return f"{found}: the ingest setup pass runs with --exist-ok (the graph is kept)", ""
    fix = delete_table_fix(table.table_id, project, instance)
    warning = (
        f"{found}: the ingest setup pass will be refused (the image can neither create it nor "
        f"write its metadata into it); {fix} before `pipeline start`"
    )
    return f"{found}: left as it is", warning


@click.command()
@CONFIG_OPTION
@click.option("--run-id", default=None, help="Default: <graph>-<time>-<random>.")
@click.option("--stages", default=None, help="Comma list; default: the dataset's DAG.")
@click.option("--advance", type=ADVANCE, default=None, help="Default: controller.advance.")
@click.option("--budget", type=float, default=None, help="Pause and alert at this USD.")
@click.option("--force", is_flag=True, help="Start even if another run of the graph is active.")
@click.option("--reason", default="", help="Why --force (recorded on the run).")
@click.option(
    "--from-layer",
    type=click.IntRange(min=2),
    default=None,
    help="Start mid-graph: the layers below were built before (their done markers are checked).",
)
@click.option("--stage", "from_stage", default=None, help="The stage of --from-layer.")
@click.option(
    "--no-preflight", is_flag=True, help="Skip the cheap `pipeline doctor` checks run first."
)
@CANARY_OPTION
def start(
    config_path: str,
    run_id: str | None,
    stages: str | None,
    advance: str | None,
    budget: float | None,
    force: bool,
    reason: str,
    from_layer: int | None,
    from_stage: str | None,
    no_preflight: bool,
    canary_n: int | None,
) -> None:
    """Start a build; the controller runs it from here, no terminal needed. One active run
    per graph: a second is refused (naming the first) unless --force. --from-layer L
    [--stage S] (default: the config's start_layers) starts S at layer L once every chunk of
    layer L-1 is marked done. The cheap checks of `pipeline doctor` run first (on a local
    stack only what it has); --no-preflight skips them."""
    connect()  # a stale emulator address fails here, before the preflight waits on it
    if not no_preflight:
        from scripts.commands.doctor import preflight

        preflight(load_config(config_path), stages=stages.split(",") if stages else None)
    run = start_run(
        config_path,
        run_id,
        stages.split(",") if stages else None,
        advance,
        budget,
        force=force,
        reason=reason,
        from_layer=from_layer,
        from_stage=from_stage,
        canary=canary_n,
    )
    click.echo(f"started run {run.run_id} ({', '.join(run.stages)}; advance {run.advance})")
    unverified = {s for s, start in run.mid_graph_starts.items() if not start["verified"]}
    checked = [
        ls.key for ls in run.ordered_layers() if ls.done_before and ls.stage not in unverified
    ]
    if checked:
        click.echo(f"built before (done markers checked): {', '.join(checked)}")
    for stage in sorted(unverified):
        line = describe_start(stage, run.mid_graph_starts[stage])
        click.echo(f"warning: {line} (recorded on the run)", err=True)
    if run.forced_start:
        past = ", ".join(run.forced_start["past_runs"])
        click.echo(f"warning: forced past the active run(s) {past} (recorded)", err=True)


@click.command()
@click.argument("run_id")
@click.argument("stage")
@click.argument("layers", nargs=-1, type=int)
def approve(run_id: str, stage: str, layers: tuple[int, ...]) -> None:
    """Approve LAYERS of STAGE (default: every layer not yet started)."""
    keys: list[str] = []

    def act(run: RunState) -> None:
        # `update_run` may apply the action again after a lost race: keep the last answer.
        keys[:] = ops.approve(run, stage, list(layers), operator_name(), _now())

    _apply(run_id, "approve", act)
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


def _refuse_a_changed_dataset(run: RunState) -> None:
    """DatasetChangedError (exit 2) when the run's dataset file changed since it started
    (shared.operate.dataset_changes); a file this machine cannot read is noted, not checked."""
    stored = run_config(run)
    if not stored.source_path or not recorded_fingerprint(run):
        return
    try:
        current = load_config(stored.source_path)
    except ConfigError as e:
        click.echo(
            f"note: the dataset file was not checked for changes since the run started ({e})",
            err=True,
        )
        return
    check_resubmit(run, current, config_versions.diff(stored, current))


@click.command()
@layer_arguments
def submit(run_id: str, stage: str, layer: int) -> None:
    """Re-submit a failed layer as a new Job; chunks already done are skipped. Layer 0 re-runs
    the stage's failed setup pass."""

    def mutate(run: RunState) -> None:
        factor = run_config(run).job.for_stage(stage).oom_memory_factor
        ops.resubmit(run, stage, layer, operator_name(), _now(), factor)

    _refuse_a_changed_dataset(connect().store.load_run(run_id))
    _apply(run_id, "submit", mutate)
    click.echo(f"re-submitted {stage} L{layer} of {run_id}")


@click.command()
@layer_arguments
def delete(run_id: str, stage: str, layer: int) -> None:
    """Delete a layer's Job and pods; the layer stops as failed (`submit` redoes it)."""
    _apply(run_id, "delete", lambda run: ops.cancel(run, stage, layer, operator_name(), _now()))
    click.echo(f"deleting the Job of {stage} L{layer} in {run_id}")


def _status_cluster(run: RunState) -> tuple[ClusterReader | None, str]:
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
    """A run's progress until the run ends (succeeded or failed: the last screen stays),
    Ctrl-C (exit 130: the build goes on, `pipeline status RUN` comes back to it) or --once:
    per layer chunks done / total, active and ready pods, retries, failed indexes, OOM kills,
    parallelism against the ramp, approval, elapsed, chunks/min, ETA, cost so far and
    projected; the run's totals, its ETA and projected cost (forecast from the runtimes
    observed so far, the ramp and the cap), spend against budget, the cluster's nodes and
    requests, and what the waiting layers wait on."""
    store = connect().store
    run = store.load_run(run_id)
    cluster, why = _status_cluster(run)

    def snapshot() -> tuple[RunProgress, str]:
        progress, note = gather(store.load_run(run_id), _now(), cluster)
        return progress, "; ".join(n for n in (why, note) if n)

    if as_json:
        click.echo(json.dumps(as_json_doc(snapshot()[0]), default=str, indent=2))
        return
    last: list[RunProgress] = []

    def view() -> RenderableType:
        progress, note = snapshot()
        last[:] = [progress]
        return status_view(progress, note, max_rows=rows)

    live(
        view,
        once,
        interval,
        console(100),
        until=lambda: last[0].status in RUN_ENDED,
        on_ctrl_c=f"the build goes on; `pipeline status {run_id}` comes back to it",
    )


COMMANDS = (setup, start, approve, pause, resume, scale, submit, delete, status)
