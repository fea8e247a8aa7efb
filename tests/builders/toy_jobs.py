"""The toy config of the manifest tests (an 8x6x3 layer-2 grid, 5 layers) and readers of a
rendered Job, shared by the tests of what a Job's pods get."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from shared.config.config import PipelineConfig
from shared.config.config_files import load_config

IMAGE = "us-docker.pkg.dev/p/r/pcg:1"
# 8x6x3 layer-2 grid (the predecessor's toy example), 5 layers.
TOY_DATASET = {"data_source": {"size": [512, 384, 192]}, "graph_config": {"CHUNK_SIZE": [64] * 3}}
BASE = {
    "graph_id": "toy",
    "dataset": "dataset.yml",
    "bigtable": {"project": "bt-proj", "instance": "bt-inst"},
    "images": {s: IMAGE for s in ("ingest", "l2cache", "meshing")},
    "workloads": {s: f"pcg.{s}:process_chunk" for s in ("ingest", "l2cache", "meshing")},
    "job": {"batch_size": 15},
}


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in at every depth."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def make_config(
    tmp_path: Path, pipeline: dict | None = None, dataset: dict | None = None
) -> PipelineConfig:
    """The toy config with `pipeline` and `dataset` merged in, written to `tmp_path`, loaded."""
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(merge(TOY_DATASET, dataset or {})))
    (tmp_path / "pipeline.yml").write_text(yaml.safe_dump(merge(BASE, pipeline or {})))
    return load_config(tmp_path / "pipeline.yml")


def env_of(manifest: dict) -> dict[str, str]:
    """The container env of a rendered Job; each name once."""
    env = manifest["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert len(names) == len(set(names)), "duplicate env names"
    return {e["name"]: e["value"] for e in env}


def pod_spec(manifest: dict) -> dict:
    """The pod template's spec of a rendered Job."""
    return manifest["spec"]["template"]["spec"]
