"""A layer's spec, table-driven on the predecessor's toy grid (8x6x3 at layer 2, 5 layers)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config.config import PipelineConfig
from shared.config.config_files import config_from_dict
from shared.jobs.autopilot import ResourceLimitError
from shared.jobs.layer_spec import (
    LayerRangeError,
    attempt_salt,
    job_name,
    layer_geometry,
    layer_spec,
)
from shared.jobs.manifest import render_job

TOY_DATASET = {"data_source": {"size": [512, 384, 192]}, "graph_config": {"CHUNK_SIZE": [64] * 3}}
BASE: dict[str, Any] = {
    "graph_id": "toy",
    "dataset": "dataset.yml",
    "bigtable": {"project": "bt-proj", "instance": "bt-inst"},
    "images": {"ingest": "img:1", "meshing": "img:1"},
    "workloads": {"ingest": "pcg.ingest:f", "meshing": "pcg.meshing:f"},
    "job": {"batch_size": 15, "perm_seed": 42},
}


def config(**job: Any) -> PipelineConfig:
    return config_from_dict({**BASE, "job": {**BASE["job"], **job}}, TOY_DATASET)


@pytest.mark.parametrize(
    ("layer", "grid", "chunks", "batch", "completions", "lock_s"),
    [
        (2, (8, 6, 3), 144, 15, 10, 180),
        (3, (4, 3, 2), 24, 7, 4, 360),
        (4, (2, 2, 1), 4, 3, 2, 720),
        (5, (1, 1, 1), 1, 1, 1, 1440),
    ],
)
def test_geometry_and_lock_expiry_per_layer(layer, grid, chunks, batch, completions, lock_s):
    spec = layer_spec(config(), "ingest", layer)
    assert (spec.layer, spec.grid_shape, spec.chunks) == (layer, grid, chunks)
    assert (spec.base_batch_size, spec.batch_size, spec.completions) == (15, batch, completions)
    assert (spec.n_layers, spec.seed, spec.lock_expiry_s) == (5, 42, lock_s)


@pytest.mark.parametrize("layer", [2, 3, 4, 5])
def test_batches_cover_every_chunk_once(layer):
    spec = layer_spec(config(), "ingest", layer)
    seen = [c for i in range(spec.completions) for c in spec.batch_chunks(i)]
    assert len(seen) == len(set(seen)) == spec.chunks
    assert all(len(spec.batch_chunks(i)) <= spec.batch_size for i in range(spec.completions))


@pytest.mark.parametrize(
    ("job", "stage", "layer", "cpu", "memory_gib"),
    [
        ({}, "ingest", 2, 0.5, 1.0),  # the config defaults
        ({"resources": {"cpu": {"base": 1, "factor": 2}, "pack": False}}, "ingest", 4, 4.0, 4.0),
        # packed: 4 vCPU forces an 8-vCPU node, filled to 6.75 (memory raised to 1:1)
        ({"resources": {"cpu": {"base": 1, "factor": 2}, "pack": True}}, "ingest", 4, 6.75, 6.75),
        # the default: not packed (a new-shape file's requests are its curves')
        ({"resources": {"cpu": {"base": 1, "factor": 2}}}, "ingest", 4, 4.0, 4.0),
        (
            {"workloads": {"meshing": {"resources": {"memory": {"base": 3}}}}},
            "meshing",
            2,
            0.5,
            3.0,
        ),
        ({"workloads": {"meshing": {"resources": {"memory": {"base": 3}}}}}, "ingest", 2, 0.5, 1.0),
    ],
)
def test_requests_follow_the_stage_curves(job, stage, layer, cpu, memory_gib):
    spec = layer_spec(config(**job), stage, layer)
    assert (spec.requests.cpu, spec.requests.memory_gib) == (cpu, memory_gib)


def test_a_stage_override_changes_its_batches_only():
    cfg = config(workloads={"meshing": {"batch_size": 4, "perm_seed": 7}})
    mesh, ingest = layer_spec(cfg, "meshing", 2), layer_spec(cfg, "ingest", 2)
    assert (mesh.batch_size, mesh.completions, mesh.seed) == (4, 36, 7)
    assert (ingest.batch_size, ingest.completions, ingest.seed) == (15, 10, 42)


@pytest.mark.parametrize(
    ("attempt", "salt"), [(0, "run-1"), (1, "run-1/attempt-1"), (7, "run-1/attempt-7")]
)
def test_job_name_of_an_attempt_is_the_manifests(attempt, salt):
    cfg = config()
    spec = layer_spec(cfg, "ingest", 3)
    assert attempt_salt("run-1", attempt) == salt
    assert spec.job_name("run-1", attempt) == job_name("toy", "ingest", 3, salt)
    manifest = render_job(cfg, "ingest", 3, run_id="run-1", parallelism=1, attempt=attempt)
    assert manifest["metadata"]["name"] == spec.job_name("run-1", attempt)
    assert len({spec.job_name("run-1", a) for a in range(3)}) == 3


@pytest.mark.parametrize("layer", [0, 1, 6, 99])
def test_layers_outside_the_graph_are_refused(layer):
    with pytest.raises(LayerRangeError, match=r"layers are 2\.\.5"):
        layer_spec(config(), "ingest", layer)


def test_requests_past_the_class_ceiling_are_refused():
    with pytest.raises(ResourceLimitError, match="layer 2"):
        layer_spec(config(resources={"cpu": {"base": 64}, "memory": {"base": 64}}), "ingest", 2)


@pytest.mark.parametrize(
    ("l2", "layer", "base", "grid", "batch", "completions"),
    [
        ((8, 6, 3), 2, 15, (8, 6, 3), 15, 10),
        ((8, 6, 3), 3, 15, (4, 3, 2), 7, 4),
        ((5, 5, 5), 4, 1, (2, 2, 2), 1, 8),  # a batch size never drops below 1
        ((1, 1, 1), 2, 100, (1, 1, 1), 100, 1),
    ],
)
def test_layer_geometry_without_a_config(l2, layer, base, grid, batch, completions):
    geo = layer_geometry(l2, layer, base)
    assert (geo.grid_shape, geo.batch_size, geo.completions) == (grid, batch, completions)
