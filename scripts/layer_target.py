"""How operator commands name what they look at: a run's layer (`RUN STAGE LAYER`), a stage's
setup pass (`RUN STAGE 0`, or `setup` for 0: the layer `pipeline submit` takes for it), or a
Job the controller does not track (`--job NAME`, e.g. a `pipeline sample` Job), resolved to a
:class:`Target`; and a layer's batch geometry (grid shape, seed, batch size)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from scripts.options import TARGET
from scripts.services import connect
from shared.config.config import PipelineConfig
from shared.config.config_files import config_from_dict
from shared.jobs.layer_spec import layer_spec
from shared.model import grid
from shared.model.state import SETUP_LAYER, LayerState, RunState, SetupState
from shared.operate.operator_actions import layer_of, setup_of

Geometry = tuple[tuple[int, int, int], int, int]  # (grid shape, seed, batch size)
SETUP_WORD = "setup"  # LAYER `setup`: the stage's setup pass, as LAYER 0


def run_config(run: RunState) -> PipelineConfig:
    """The config a run was started with (its stored snapshot)."""
    return config_from_dict(run.config, run.dataset)


def layer_geometry(cfg: PipelineConfig, stage: str, layer: int) -> Geometry:
    """(grid shape, seed, batch size) of a stage's layer."""
    spec = layer_spec(cfg, stage, layer)
    return spec.grid_shape, spec.seed, spec.batch_size


def batch_chunks(index: int, shape: tuple[int, ...], seed: int, size: int) -> list[tuple[int, ...]]:
    """The chunks of batch `index`, in the order its pod processes them."""
    return [tuple(int(v) for v in c) for c in grid.batch_coords(index, shape, seed, size)]


def parse_int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(f"{what} must be an integer, got {text!r}") from None


@dataclass
class Target:
    """What a cluster-reading command looks at: a Job, and its run and layer (or the stage's
    setup pass, whose Job has one pod, index 0) if known."""

    job: str
    run: RunState | None = None
    ls: LayerState | None = None
    cfg: PipelineConfig | None = None
    setup: SetupState | None = None

    @property
    def name(self) -> str:
        """What it is, for headings: `ingest-L3`, `ingest setup`, or the Job's name."""
        if self.setup is not None:
            return f"{self.setup.stage} setup"
        return self.ls.key if self.ls is not None else f"job {self.job}"

    @property
    def namespace(self) -> str | None:
        return self.cfg.namespace if self.cfg else None

    def geometry(self) -> Geometry:
        """(grid shape, seed, batch size) of the layer (run mode only)."""
        assert self.cfg is not None and self.ls is not None
        return layer_geometry(self.cfg, self.ls.stage, self.ls.layer)

    def batch_chunks(self, index: int) -> list[tuple[int, ...]]:
        """The chunks of the layer's batch `index`, in processing order (run mode only)."""
        return batch_chunks(index, *self.geometry())


def resolve_target(
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
    run = connect().store.load_run(run_id)
    layer = SETUP_LAYER if raw_layer == SETUP_WORD else parse_int(raw_layer, "LAYER")
    if layer == SETUP_LAYER:
        setup = setup_of(run, stage)
        if need_job and not setup.job_name:
            raise LookupError(f"the {stage} setup of run {run_id} is {setup.phase}: no Job yet")
        return Target(setup.job_name, run, None, run_config(run), setup), list(args[3:])
    ls = layer_of(run, stage, layer)
    if need_job and not ls.job.name:
        raise LookupError(f"{ls.key} of run {run_id} is {ls.phase}: it has no Job yet")
    return Target(ls.job.name, run, ls, run_config(run)), list(args[3:])
