"""`pipeline local up` / `pipeline local env`: the local stack in the foreground."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from scripts.services import DEFAULT_STACK_DIR, load_stack_env


@click.group()
def local() -> None:
    """The local stack: emulators, Kubernetes (its own control plane, the process kubelet),
    functions, ticker."""


@local.command()
@click.option(
    "--state-dir",
    default=DEFAULT_STACK_DIR,
    show_default=True,
    type=click.Path(file_okay=False),
)
@click.option("--project", default="local-demo", show_default=True)
@click.option(
    "--tick",
    "tick_s",
    type=float,
    default=60.0,
    show_default=True,
    help="Heartbeat period in seconds (Cloud Scheduler's is 60).",
)
@click.option(
    "--cpu",
    type=float,
    default=4.0,
    show_default=True,
    help="Local node capacity, vCPU (pods beyond it stay Pending).",
)
@click.option("--memory", type=float, default=16.0, show_default=True, help="GiB.")
def up(state_dir: str, project: str, tick_s: float, cpu: float, memory: float) -> None:
    """Run the local stack in the foreground until Ctrl-C."""
    from adapters.local.stack import LocalStack

    if load_stack_env(state_dir):
        raise click.ClickException(
            f"{state_dir}/stack.json exists: a stack may be running there. Stop it, or "
            f"remove the file if it crashed."
        )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LocalStack(project, Path(state_dir), tick_s, cpu, memory) as stack:
        click.echo("local stack is up. In another terminal:")
        for key, value in stack.env.items():
            click.echo(f"  export {key}={value}")
        click.echo("then: pipeline start -c examples/demo/pipeline.yml ... (Ctrl-C stops)")
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    click.echo("local stack stopped")


@local.command()
@click.option("--state-dir", default=DEFAULT_STACK_DIR, show_default=True)
def env(state_dir: str) -> None:
    """Print `export` lines for a running local stack: eval "$(pipeline local env)"."""
    stack_env = load_stack_env(state_dir)
    if not stack_env:
        raise click.ClickException(f"no local stack in {state_dir}: `pipeline local up`")
    for key, value in stack_env.items():
        click.echo(f"export {key}={value}")


COMMANDS = (local,)
