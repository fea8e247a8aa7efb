"""The demo's example config at another size or with other job settings, or as files with a
watershed (examples/demo leaves it to `pipeline demo`)."""

from __future__ import annotations

from pathlib import Path

import yaml

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


#: The batch size of the tables written against the demo at 32 chunks a layer-2 pod (the
#: template's own may change: `pipeline demo`'s speed is tuned there).
TABLE_BATCH = 32


def with_batch(cfg: PipelineConfig, batch_size: int = TABLE_BATCH) -> PipelineConfig:
    """`cfg` with the job's batch size replaced."""
    return cfg.model_copy(update={"job": cfg.job.model_copy(update={"batch_size": batch_size})})


def demo_config_file(directory: Path, watershed: str = "volume.npy") -> Path:
    """examples/demo's pipeline.yml and dataset.yml copied into `directory`, the watershed
    `watershed` beside them (an empty file is made there when it is a plain name: what
    `pipeline validate` and the preflight look for is that it exists); the pipeline.yml."""
    raw = yaml.safe_load(DEMO.read_text())
    dataset = yaml.safe_load((DEMO.parent / raw["dataset"]).read_text())
    dataset["data_source"]["watershed"] = watershed
    if watershed and "/" not in watershed:
        (directory / watershed).write_bytes(b"")
    (directory / "dataset.yml").write_text(yaml.safe_dump(dataset, sort_keys=False))
    path = directory / "pipeline.yml"
    path.write_text(yaml.safe_dump({**raw, "dataset": "dataset.yml"}, sort_keys=False))
    return path
