"""The demo's data for a build by hand: the synthetic volume and a config pair pointing at it
(`pipeline demo data DIR`). `pipeline demo` makes the same volume in its own workdir."""

from __future__ import annotations

from pathlib import Path

import yaml

from demo.volume import generate_volume, save_volume
from shared.config.config_files import load_config
from shared.jobs.render_check import validate_config_renders
from shared.reconcile.build_plan import check_stages

VOLUME_SEED = 7  # as `pipeline demo`
PASS_BLOCKS = {"l2cache": "l2cache_config", "meshing": "mesh_config"}


def write_demo_data(
    example: Path, directory: Path, size: int, chunk: int, stages: list[str]
) -> Path:
    """Write DIR/volume.npy, DIR/dataset.yml and DIR/pipeline.yml; returns the config path.

    The dataset is the example's with this size and chunk, its volume at an absolute path,
    and only the pass blocks of `stages` (so `pipeline start` builds just those)."""
    if size % chunk:
        raise ValueError(f"--size {size} must be a multiple of --chunk {chunk}")
    directory.mkdir(parents=True, exist_ok=True)
    raw = yaml.safe_load(example.read_text())
    ds_raw = yaml.safe_load((example.parent / raw["dataset"]).read_text())
    volume = (directory / "volume.npy").resolve()
    ds_raw["data_source"] = {**ds_raw["data_source"], "size": [size] * 3, "watershed": str(volume)}
    ds_raw["graph_config"] = {**ds_raw["graph_config"], "CHUNK_SIZE": [chunk] * 3}
    for stage, block in PASS_BLOCKS.items():
        if stage not in stages:
            ds_raw.pop(block, None)
    raw["dataset"] = "dataset.yml"
    (directory / "dataset.yml").write_text(yaml.safe_dump(ds_raw, sort_keys=False))
    cfg_path = directory / "pipeline.yml"
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config(cfg_path)
    if cfg.ds.mesh_config is not None and cfg.ds.mesh_config.max_layer:
        from shared.model.layers import layer_count

        root = layer_count(cfg.layer2_shape())
        if cfg.ds.mesh_config.max_layer > root:  # a small volume has fewer layers
            ds_raw["mesh_config"]["max_layer"] = root
            (directory / "dataset.yml").write_text(yaml.safe_dump(ds_raw, sort_keys=False))
            cfg = load_config(cfg_path)
    check_stages(cfg, stages)
    validate_config_renders(cfg)
    save_volume(volume, generate_volume(cfg.ds.data_source.size, VOLUME_SEED))
    return cfg_path
