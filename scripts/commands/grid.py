"""Commands that answer "which pod builds this chunk?" and render a layer's Job."""

from __future__ import annotations

import click
import yaml

from scripts.layer_target import Geometry, batch_chunks, layer_geometry
from scripts.options import CONFIG_OPTION, STAGE_OPTION
from shared.config.config import PipelineConfig
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


@click.command()
@CONFIG_OPTION
def validate(config_path: str) -> None:
    """Load the config and render every Job it implies; report the first problem."""
    cfg = load_config(config_path)
    validate_config_renders(cfg)
    click.echo(f"{config_path}: ok (graph {cfg.graph_id}, layer-2 grid {cfg.layer2_shape()})")
    _echo_lock_scale_warning(cfg)


def _echo_lock_scale_warning(cfg: PipelineConfig) -> None:
    """On stderr, so a rendered manifest on stdout stays valid YAML."""
    warning = lock_scale_warning(cfg)
    if warning:
        click.echo(f"warning: {warning}", err=True)


COMMANDS = (locate, batch, render, validate)
