"""Commands that answer "which pod builds this chunk?" and render a layer's Job."""

from __future__ import annotations

import click
import yaml

from scripts.layer_target import Geometry, batch_chunks, layer_geometry
from scripts.options import CONFIG_OPTION, STAGE_OPTION
from shared.config.config import ConfigError, PipelineConfig
from shared.config.config_files import load_config
from shared.jobs.manifest import lock_scale_warning, render_job
from shared.jobs.render_check import validate_config_renders
from shared.model import grid
from shared.model.layers import layer_count


def _checked_geometry(cfg: PipelineConfig, stage: str, layer: int) -> Geometry:
    n_layers = layer_count(cfg.layer2_shape())
    if not 2 <= layer <= n_layers:
        raise click.BadParameter(f"layer {layer}: this graph's layers are 2..{n_layers}")
    return layer_geometry(cfg, stage, layer)


@click.command()
@CONFIG_OPTION
@STAGE_OPTION
@click.argument("layer", type=int)
@click.argument("coord", nargs=3, type=int)
def locate(config_path: str, stage: str, layer: int, coord: tuple[int, int, int]) -> None:
    """Which batch index (pod) owns chunk X Y Z at LAYER."""
    cfg = load_config(config_path)
    shape, seed, batch = _checked_geometry(cfg, stage, layer)
    index = grid.coord_to_batch_index(coord, shape, seed, batch)
    click.echo(
        f"{stage} layer {layer} chunk {tuple(coord)} -> batch {index} of "
        f"{grid.num_batches(shape, batch)} (grid {shape}, batch size {batch}, seed {seed})"
    )


@click.command()
@CONFIG_OPTION
@STAGE_OPTION
@click.argument("layer", type=int)
@click.argument("index", type=int)
def batch(config_path: str, stage: str, layer: int, index: int) -> None:
    """List the chunks of batch INDEX at LAYER, in the order the pod processes them."""
    cfg = load_config(config_path)
    coords = batch_chunks(index, *_checked_geometry(cfg, stage, layer))
    click.echo(f"{stage} layer {layer} batch {index}: {len(coords)} chunks")
    for coord in coords:
        click.echo(str(coord))


@click.command()
@CONFIG_OPTION
@click.argument("stage")
@click.argument("layer", type=int)
@click.option("--parallelism", type=int, default=None, help="Default: the ramp's start.")
@click.option("--run-id", default="preview", show_default=True)
def render(config_path: str, stage: str, layer: int, parallelism: int | None, run_id: str) -> None:
    """Print the Indexed Job of STAGE at LAYER as YAML."""
    cfg = load_config(config_path)
    start = parallelism or cfg.job.for_stage(stage).ramp.start
    manifest = render_job(cfg, stage, layer, run_id=run_id, parallelism=start)
    click.echo(yaml.safe_dump(manifest, sort_keys=False), nl=False)
    _echo_lock_scale_warning(cfg)


def input_problems(cfg: PipelineConfig) -> list[str]:
    """What is wrong with the dataset's inputs that can be told without a service: a required
    one left empty, a local file or folder that is not there (gs:// is `pipeline doctor`'s)."""
    from adapters.wiring import cli_services
    from shared.doctor import needs

    local_path_facts = cli_services().local_path_facts

    problems = [
        f"{key} is empty: there is no input to build from; {needs.empty_input_fix(cfg)}"
        for key in needs.empty_inputs(cfg)
    ]
    for path in needs.data_paths(cfg):
        found = local_path_facts(cfg, path)
        if found["readable"] is False:
            problems.append(f"{path.key} {path.url}: {found['why']}")
    return problems


@click.command()
@CONFIG_OPTION
def validate(config_path: str) -> None:
    """Load the config, render every Job it implies and check its inputs are given (a local
    one, that it exists); report the problems."""
    cfg = load_config(config_path)
    validate_config_renders(cfg)
    problems = input_problems(cfg)
    if problems:
        raise ConfigError(f"{config_path}: " + "; ".join(problems))
    click.echo(f"{config_path}: ok (graph {cfg.graph_id}, layer-2 grid {cfg.layer2_shape()})")
    _echo_lock_scale_warning(cfg)


def _echo_lock_scale_warning(cfg: PipelineConfig) -> None:
    """On stderr, so a rendered manifest on stdout stays valid YAML."""
    warning = lock_scale_warning(cfg)
    if warning:
        click.echo(f"warning: {warning}", err=True)


COMMANDS = (locate, batch, render, validate)
