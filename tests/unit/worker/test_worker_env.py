"""worker.env: PCG_BATCH_SIZE is this layer's own batch size, used as is (contract 1)."""

from __future__ import annotations

import json

import pytest

from shared.model.grid import num_batches
from worker.env import parse_env
from worker.errors import WorkerConfigError

DATASET = {"data_source": {"size": [512, 384, 192]}, "graph_config": {"CHUNK_SIZE": [64] * 3}}
GRIDS = {2: (8, 6, 3), 3: (4, 3, 2), 4: (2, 2, 1), 5: (1, 1, 1)}


def _env(layer: int, batch: int, index: int = 0, **extra: str) -> dict[str, str]:
    return {
        "PCG_GRAPH_ID": "toy",
        "PCG_LAYER": str(layer),
        "PCG_PERM_SEED": "42",
        "PCG_BATCH_SIZE": str(batch),
        "PCG_GRID_SHAPE": ",".join(map(str, GRIDS[layer])),
        "PCG_N_LAYERS": "5",
        "PCG_DATASET_JSON": json.dumps(DATASET),
        "BIGTABLE_PROJECT": "p",
        "BIGTABLE_INSTANCE": "i",
        "JOB_COMPLETION_INDEX": str(index),
        "PCG_WORKLOAD": "demo.ingest:process_chunk",
        **extra,
    }


@pytest.mark.parametrize(("layer", "batch"), [(2, 15), (3, 7), (4, 3), (5, 1), (3, 15)])
def test_the_batch_size_is_used_as_is(layer, batch):
    env = parse_env(_env(layer, batch))
    assert env.batch_size == env.layer_batch_size == batch


@pytest.mark.parametrize(("layer", "batch"), [(3, 7), (4, 3)])
def test_the_last_index_of_the_layer_is_accepted(layer, batch):
    last = num_batches(GRIDS[layer], batch) - 1
    assert parse_env(_env(layer, batch, last)).index == last
    with pytest.raises(WorkerConfigError, match="past the last batch"):
        parse_env(_env(layer, batch, last + 1))


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"PCG_BATCH_SIZE": "0"}, "PCG_BATCH_SIZE=0"),
        ({"PCG_BATCH_SIZE": "x"}, "PCG_BATCH_SIZE='x'"),
        ({"PCG_N_PROCESSES": "0"}, "PCG_N_PROCESSES=0"),
    ],
)
def test_bad_values_name_the_variable(extra, match):
    with pytest.raises(WorkerConfigError, match=match):
        parse_env(_env(3, 7, **extra))


def test_n_processes_is_read():
    assert parse_env(_env(2, 15, PCG_N_PROCESSES="6")).n_processes == 6
    assert parse_env(_env(2, 15)).n_processes == 1
