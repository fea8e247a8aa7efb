"""`pipeline apply`: a new config version for a running build
(shared/operate/config_versions.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from scripts.layer_target import run_config
from scripts.services import connect, operator_name
from shared.config.config_files import load_config
from shared.jobs.render_check import validate_config_renders
from shared.model.state import RunState
from shared.operate import config_versions as versions
from shared.operate.operator_actions import ActionError


@click.command()
@click.argument("run_id")
@click.option(
    "-c",
    "--config",
    "config_path",
    default=None,
    help="The edited pipeline.yml (default: the file the run was started from, re-read).",
)
@click.option("--force", is_flag=True, help="Apply changes that invalidate finished work.")
@click.option("--by", default=None, help="Who applies it (default: $USER).")
def apply(run_id: str, config_path: str | None, force: bool, by: str | None) -> None:
    """Record a new config version on RUN_ID and apply it to its unfinished layers: the
    ramp and controller settings at once (next reconcile); resources and commands in the
    Jobs created from now on (a running layer: its next attempt). A running layer whose
    image, perm_seed, batch_size or env differs is replaced at once (its Job deleted, a new
    attempt created; done chunks are skipped). Changes to perm_seed, batch_size, the grid,
    data_source, graph_config or graph_id are refused unless --force. Prints the diff
    (dotted keys, old -> new), when each takes effect, and what it does to each running
    layer."""
    services = connect()
    current = run_config(services.store.load_run(run_id))
    new = load_config(config_path or current.source_path)
    validate_config_renders(new)
    changes = versions.diff(current, new)
    if not changes:
        click.echo(f"{run_id}: no change from config version on the run")
        return
    entry: dict[str, Any] = {}

    def mutate(run: RunState) -> None:
        # Against the run as stored now (a concurrent apply may have moved it on).
        fresh = versions.diff(run_config(run), new)
        now = datetime.now(UTC)
        entry.clear()
        entry.update(versions.apply_config(run, new, fresh, force, by or operator_name(), now))

    try:
        services.store.update_run(run_id, mutate)
    except ActionError:
        _print_diff(changes)  # what was refused, above the refusal (exit 2)
        raise
    services.store.add_config_version(run_id, entry)
    error = services.try_kick(run_id, "apply")
    click.echo(f"{run_id}: config version {entry['version']} by {entry['by']}")
    _print_diff([versions.Change(**c) for c in entry["changes"]])
    layers = entry.get("running_layers") or []
    if layers:
        click.echo("running layers:")
    for layer in layers:
        click.echo(f"  {layer['line']}")
    if error is not None:
        click.echo(f"warning: the kick failed ({error}); the next tick applies it", err=True)


def _print_diff(changes: list[versions.Change]) -> None:
    for c in changes:
        click.echo(f"  {c.key}: {c.old!r} -> {c.new!r}  [{c.when}]")


COMMANDS = (apply,)
