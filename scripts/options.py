"""Arguments and options several `pipeline` commands share, defined once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

TARGET = "RUN STAGE LAYER"

CONFIG_OPTION = click.option(
    "-c",
    "--config",
    "config_path",
    default="pipeline.yml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="pipeline.yml (its `dataset:` names the dataset file).",
)
STAGE_OPTION = click.option("--stage", default="ingest", show_default=True)
JOB_OPTION = click.option(
    "--job",
    "job",
    default=None,
    metavar="NAME",
    help="A Job by name instead of RUN STAGE LAYER (e.g. the Job of `pipeline sample`).",
)
TARGET_ARGS = click.argument("args", nargs=-1, metavar=TARGET)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
YES_OPTION = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
ONCE_OPTION = click.option("-o", "--once", is_flag=True, help="One snapshot, then exit.")
# `pipeline start` and `pipeline demo`: a canary before each stage's layer 2, for one run.
CANARY_OPTION = click.option(
    "--canary",
    "canary_n",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Build N scattered chunks of each stage's layer 2 first, size the layer from them "
    "and forecast the build (controller.canary_chunks; docs/canary-and-rightsize.md).",
)


def interval_option(default: float) -> Callable[[F], F]:
    """`-i/--interval SECONDS` between refreshes of a live view."""
    return click.option(
        "-i", "--interval", type=float, default=default, show_default=True, help="Seconds."
    )


def layer_arguments(command: F) -> F:
    """The arguments `RUN_ID STAGE LAYER` of a command that acts on one layer of a run."""
    command = click.argument("layer", type=int)(command)
    command = click.argument("stage")(command)
    return click.argument("run_id")(command)
