"""`pipeline locate`, `batch`, `render` and `validate`: what an operator uses when a chunk
fails. No emulators needed."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from scripts.cli import main
from shared.config.config_files import load_config
from shared.model import grid
from tests.builders.demo_configs import demo_config_file

DEMO = str(Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml")
BATCH = load_config(DEMO).job.batch_size  # the template's (128 at layer 2 in the demo)


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    ("layer", "coord"), [(2, (3, 4, 5)), (2, (0, 0, 0)), (3, (3, 3, 3)), (5, (0, 0, 0))]
)
def test_locate_then_batch_contains_the_chunk(layer, coord):
    result = run("locate", "-c", DEMO, str(layer), *map(str, coord))
    assert result.exit_code == 0, result.output
    index = int(result.output.split("-> batch ")[1].split()[0])
    shape = tuple(8 // 2 ** (layer - 2) or 1 for _ in range(3))
    assert index == grid.coord_to_batch_index(coord, shape, 42, grid.layer_batch_size(BATCH, layer))
    listing = run("batch", "-c", DEMO, str(layer), str(index))
    assert listing.exit_code == 0
    assert f"({coord[0]}, {coord[1]}, {coord[2]})" in listing.output.splitlines()[1:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("locate", "-c", DEMO, "9", "0", "0", "0"), "layers are 2..5"),
        (("batch", "-c", DEMO, "2", "16"), "past the last batch"),
        (("locate", "-c", DEMO, "2", "8", "0", "0"), "8"),
        (("render", "-c", DEMO, "ingest", "7"), "layers are 2..5"),
        (("locate", "-c", "/nonexistent.yml", "2", "0", "0", "0"), "file not found"),
    ],
)
def test_bad_arguments_name_the_range(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output


def test_render_prints_a_valid_job():
    result = run("render", "-c", DEMO, "ingest", "3")
    assert result.exit_code == 0
    manifest = yaml.safe_load(result.output)
    kubernetes_validate.validate(manifest, "1.33", strict=True)
    assert manifest["spec"]["completions"] == grid.num_batches(
        (4, 4, 4), grid.layer_batch_size(BATCH, 3)
    )


def test_validate_config(tmp_path):
    result = run("validate", "-c", str(demo_config_file(tmp_path)))
    assert result.exit_code == 0, result.output
    assert "ok (graph demo" in result.output


def test_validate_refuses_an_empty_or_missing_watershed(tmp_path):
    """examples/demo leaves the watershed to `pipeline demo`: as a by-hand config it has no
    input, and validate says so (exit 2) naming the key, the file and the demo's data."""
    empty = run("validate", "-c", DEMO)
    assert empty.exit_code == 2, empty.output
    assert "data_source.watershed is empty" in empty.output
    assert "examples/demo/dataset.yml" in empty.output and "pipeline demo data DIR" in empty.output
    gone = run("validate", "-c", str(demo_config_file(tmp_path, str(tmp_path / "gone.npy"))))
    assert gone.exit_code == 2, gone.output
    assert f"data_source.watershed {tmp_path / 'gone.npy'}" in gone.output
    assert "not found" in gone.output
