"""`pipeline local up` / `pipeline local env`: the local stack in the foreground."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from scripts import cluster_access
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
    from adapters import wiring
    from adapters.local.crashed_stack import StackRunningError, leftovers, stop_leftovers

    try:
        found = leftovers(Path(state_dir))
    except StackRunningError as e:
        raise click.ClickException(str(e)) from None
    if found is not None:
        names = ", ".join(f"{f.name} (pid {f.pgid})" for f in found) or "nothing running"
        click.echo(f"a local stack in {state_dir} was killed without stopping; left: {names}")
        stop_leftovers(Path(state_dir), found)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with wiring.local_stack(project, Path(state_dir), tick_s, cpu, memory) as stack:
        for line in ready_lines(Path(state_dir), Path.cwd(), cli_env(stack.env, state_dir)):
            click.echo(line)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    click.echo("local stack stopped")


# A demo build by hand, as docs/cli.md#running-a-build-on-the-local-stack-by-hand has it: the
# data it needs is written by the first command, in the folder the commands run in.
BY_HAND = (
    "pipeline demo data demo-data",
    "pipeline setup -c demo-data/pipeline.yml",
    "pipeline start -c demo-data/pipeline.yml --run-id r1",
    "pipeline status r1",
)


def cli_env(stack_env: dict[str, str], state_dir: str | Path) -> dict[str, str]:
    """What the CLI needs in another folder: the stack's addresses, and its Kubernetes as the
    operators reach it (their kubeconfig and the namespace: the commands that read the cluster
    or write the pods' Secret)."""
    doc = cluster_access.local_stack(Path(state_dir)) or {}
    kube = {}
    if doc.get("kubeconfig"):
        kube = {"KUBECONFIG": doc["kubeconfig"], cluster_access.NAMESPACE_ENV: doc["namespace"]}
    return {**stack_env, **kube}


def ready_lines(state_dir: Path, cwd: Path, env: dict[str, str]) -> list[str]:
    """What `local up` says once the stack is up: a demo build by hand that works from where
    the operator stands (this folder, where the CLI finds the stack; elsewhere, after the
    `export` lines), and how to stop it."""
    here = (cwd / DEFAULT_STACK_DIR).resolve() == (cwd / state_dir).resolve()
    where = (
        f"in another terminal, in this folder ({cwd})"
        if here
        else f'in another terminal, after `eval "$(pipeline local env --state-dir '
        f'{(cwd / state_dir).resolve()})"`'
    )
    lines = [f"local stack is up. A demo build by hand, {where}:"]
    lines += [f"  {command}" for command in BY_HAND]
    lines.append("From another folder, set these first:" if here else "That sets:")
    lines += [f"  export {key}={value}" for key, value in env.items()]
    lines.append("Ctrl-C stops the stack.")
    return lines


@local.command()
@click.option("--state-dir", default=DEFAULT_STACK_DIR, show_default=True)
def env(state_dir: str) -> None:
    """Print `export` lines for a running local stack: eval "$(pipeline local env)"."""
    stack_env = load_stack_env(state_dir)
    if not stack_env:
        raise click.ClickException(f"no local stack in {state_dir}: `pipeline local up`")
    for key, value in cli_env(stack_env, state_dir).items():
        click.echo(f"export {key}={value}")


COMMANDS = (local,)
