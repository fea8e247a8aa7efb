"""Graph metadata: the report line a setup pod prints, the controller's check, and the
worker taking its geometry from it (refusing a PCG_GRID_SHAPE that disagrees)."""

from __future__ import annotations

import pytest

from shared.model.graph_meta import GraphMeta, GraphMetaError, mismatch, parse_report, report_line
from shared.model.worker_contract import WorkerEnv
from worker.env import with_graph_meta
from worker.errors import WorkerConfigError

META = GraphMeta((0, 0, 0), (100, 60, 30), (32, 32, 16), 4)  # layer-2 grid 4x2x2


def test_the_report_round_trips_and_the_last_one_counts():
    other = GraphMeta((0, 0, 0), (64, 64, 64), (32, 32, 32), 3)
    log = "\n".join(["starting", report_line(other), '{"message": "x"}', report_line(META)])
    assert parse_report(log) == META
    assert META.layer2_shape == (4, 2, 2) and META.size == (100, 60, 30)
    assert parse_report("PyChunkedGraph: table created") is None


@pytest.mark.parametrize(
    "line",
    [
        '{"graph_meta": null}',
        '{"graph_meta": {"bounds_lo": [0, 0], "bounds_hi": [1, 1, 1], "chunk_size": [1, 1, 1],'
        ' "layer_count": 2}}',
        '{"graph_meta": {"bounds_lo": [0, 0, 0], "bounds_hi": [0, 1, 1], "chunk_size": [1, 1, 1],'
        ' "layer_count": 2}}',
    ],
)
def test_a_malformed_report_is_an_error(line):
    with pytest.raises(GraphMetaError):
        parse_report(line)


@pytest.mark.parametrize(
    ("l2", "layers", "want"),
    [
        ((4, 2, 2), 4, ""),
        ((4, 2, 1), 4, "layer-2 grid [4, 2, 2] (bounds [0, 0, 0]..[100, 60, 30]"),
        ((4, 2, 2), 5, "layer count 4 in the graph metadata vs 5 planned"),
    ],
)
def test_mismatch_names_both_numbers(l2, layers, want):
    got = mismatch(META, l2, layers)
    assert (want in got) and (bool(got) == bool(want))
    if got:
        assert f"vs {list(l2)} planned" in got or "layer count" in got


def env(layer=3, grid=(2, 1, 1), n_layers=4) -> WorkerEnv:
    return WorkerEnv(
        graph_id="g",
        layer=layer,
        seed=1,
        batch_size=1,
        n_processes=1,
        grid_shape=grid,
        stage="ingest",
        run_id="r",
        workload="demo.ingest:process_chunk",
        n_layers=n_layers,
        lock_expiry_s=60,
        project="p",
        instance="i",
        dataset={"data_source": {"size": [1, 1, 1]}, "graph_config": {"CHUNK_SIZE": [1, 1, 1]}},
    )


def test_the_worker_takes_its_geometry_from_the_metadata():
    out = with_graph_meta(env(), META)
    assert out.dataset["data_source"]["size"] == [100, 60, 30]
    assert out.dataset["graph_config"]["CHUNK_SIZE"] == [32, 32, 16]
    assert with_graph_meta(env(), None) == env()  # no metadata: the env stands


@pytest.mark.parametrize(("grid", "n_layers"), [((2, 2, 1), 4), ((2, 1, 1), 5)])
def test_the_worker_refuses_a_grid_the_metadata_disagrees_with(grid, n_layers):
    with pytest.raises(WorkerConfigError, match=r"layer-3 grid \[2, 1, 1\], 4 layers"):
        with_graph_meta(env(grid=grid, n_layers=n_layers), META)


def test_an_images_layer_grids_round_trip_and_our_stored_record_is_unchanged():
    image = GraphMeta((0, 0, 0), (100, 60, 30), (32, 32, 16), 4, ((2, (4, 2, 2)), (3, (2, 1, 1))))
    assert parse_report(report_line(image)) == image
    assert "layer_chunk_bounds" not in META.to_dict()  # this project's record: as before
    assert mismatch(image, (4, 2, 2), 4) == ""


@pytest.mark.parametrize(
    ("grids", "want"),
    [
        ('{"3": [2, 1]}', "layer_chunk_bounds[3]: [2, 1] is not 3 integers"),
        ('{"x": [2, 1, 1]}', "layer 'x' is not an integer"),
        ("[1, 2]", "layer_chunk_bounds: not a mapping of layers"),
    ],
)
def test_a_malformed_layer_grid_names_the_field(grids, want):
    line = (
        '{"graph_meta": {"bounds_lo": [0, 0, 0], "bounds_hi": [8, 8, 8], "chunk_size": [8, 8, 8],'
        f' "layer_count": 2, "layer_chunk_bounds": {grids}}}}}'
    )
    with pytest.raises(GraphMetaError, match=want.replace("[", r"\[").replace("]", r"\]")):
        parse_report(line)


def test_a_layer_grid_the_image_iterates_differently_is_named():
    image = GraphMeta((0, 0, 0), (100, 60, 30), (32, 32, 16), 4, ((2, (4, 2, 2)), (3, (1, 1, 1))))
    assert mismatch(image, (4, 2, 2), 4) == (
        "layer 3 chunk grid [1, 1, 1] iterated by the image vs [2, 1, 1] planned: the graph's "
        "table was set up for another grid. Fix data_source.size (or drop it to read the "
        "watershed's info file) or set the graph up again, then start a new run"
    )
