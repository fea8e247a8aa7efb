"""Config loading: the demo config loads; typos and bad values name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.config.config import ConfigError
from shared.config.config_files import load_config
from shared.config.stage_selection import check_stages, default_stages, top_layer
from shared.model.stages import PlanError
from shared.reconcile.build_plan import new_run

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"


def write(tmp_path: Path, pipeline: dict, dataset: dict) -> Path:
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(dataset))
    path = tmp_path / "pipeline.yml"
    path.write_text(yaml.safe_dump({"dataset": "dataset.yml", **pipeline}))
    return path


BASE = {
    "graph_id": "g1",
    "bigtable": {"project": "p", "instance": "i"},
    "images": {"ingest": "img"},
}
DATASET = {"data_source": {"size": [64, 64, 32]}, "graph_config": {"CHUNK_SIZE": [16, 16, 16]}}


def test_demo_config_loads():
    cfg = load_config(DEMO)
    assert cfg.graph_id == "demo" and cfg.layer2_shape() == (8, 8, 8)


@pytest.mark.parametrize(
    ("pipeline", "dataset", "field"),
    [
        ({**BASE, "grpah_id": "x"}, DATASET, "grpah_id: unknown key"),
        ({**BASE, "job": {"batch_sise": 3}}, DATASET, "job.batch_sise: unknown key"),
        ({**BASE, "job": {"ramp": {"start": 0}}}, DATASET, "job.ramp.start"),
        ({**BASE, "images": {"ingets": "x"}}, DATASET, "images.ingets: unknown stage"),
        ({**BASE, "controller": {"advance": "sometimes"}}, DATASET, "controller.advance"),
        ({**BASE, "graph_id": "Bad Id"}, DATASET, "graph_id"),
        (BASE, {**DATASET, "graph_config": {"CHUNK_SIZE": [16, 16]}}, "graph_config.CHUNK_SIZE"),
        (BASE, {**DATASET, "mesh_cfg": {}}, "mesh_cfg: unknown key"),
        (BASE, {"graph_config": DATASET["graph_config"]}, "data_source"),
    ],
)
def test_bad_config_names_the_field(tmp_path, pipeline, dataset, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config(write(tmp_path, pipeline, dataset))


def test_missing_files_are_named(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yml")
    (tmp_path / "p.yml").write_text(yaml.safe_dump({**BASE, "dataset": "missing.yml"}))
    with pytest.raises(ConfigError, match="missing.yml: file not found"):
        load_config(tmp_path / "p.yml")


def test_per_workload_job_overrides(tmp_path):
    pipeline = {**BASE, "job": {"batch_size": 50, "workloads": {"meshing": {"batch_size": 8}}}}
    cfg = load_config(write(tmp_path, pipeline, DATASET))
    assert cfg.job.for_stage("meshing").batch_size == 8
    assert cfg.job.for_stage("ingest").batch_size == 50


def test_build_dag_from_dataset(tmp_path):
    dataset = {**DATASET, "mesh_config": {"max_layer": 4}, "l2cache_config": {}}
    cfg = load_config(write(tmp_path, BASE, dataset))
    assert default_stages(cfg) == ["ingest", "meshing", "l2cache"]
    tops = (top_layer(cfg, "ingest"), top_layer(cfg, "meshing"), top_layer(cfg, "l2cache"))
    assert tops == (4, 4, 2)
    with pytest.raises(PlanError, match="unknown stage"):
        check_stages(cfg, ["ingest", "mesh"])


def test_new_run_has_every_layer_waiting(tmp_path):
    from datetime import UTC, datetime

    cfg = load_config(write(tmp_path, BASE, DATASET))
    run = new_run(cfg, "r", ["ingest"], "approve", datetime.now(UTC))
    assert sorted(run.layers) == ["ingest-L2", "ingest-L3", "ingest-L4"]
    assert all(ls.phase == "waiting" for ls in run.layers.values())
    with pytest.raises(PlanError, match="mesh_config"):
        new_run(cfg, "r", ["ingest", "meshing"], "auto", datetime.now(UTC))
