"""The demo's example config at another size or with other job settings."""

from __future__ import annotations

from pathlib import Path

from shared.config.config import PipelineConfig
from shared.config.config_files import load_config

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"


def demo_cfg(size: int = 64, **job) -> PipelineConfig:
    """examples/demo/pipeline.yml with a `size`³ volume and `job` fields replaced."""
    cfg = load_config(DEMO)
    source = cfg.ds.data_source.model_copy(update={"size": (size,) * 3})
    cfg = cfg.model_copy(
        update={"dataset_config": cfg.ds.model_copy(update={"data_source": source})}
    )
    return cfg.model_copy(update={"job": cfg.job.model_copy(update=job)}) if job else cfg
