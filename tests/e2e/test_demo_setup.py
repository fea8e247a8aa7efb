"""The grid from the data, end to end on the local stack: a demo whose hand-typed
`data_source.size` disagrees with its volume is refused by the controller after the ingest
setup wrote the volume's own bounds into the graph's metadata: the setup fails with both
grids, `setup_failed` is alerted, and no layer Job is ever created."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.volume import generate_volume, save_volume
from scripts.demo_run import prepare_config, run_demo
from shared.config.config_files import load_config

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("need_emulators")]

ROOT = Path(__file__).resolve().parents[2]


def test_a_size_typed_wrong_is_refused_after_the_setup(tmp_path):
    cfg = prepare_config(load_config(ROOT / "examples" / "demo" / "pipeline.yml"), tmp_path, 32, 8)
    # The data is 48^3 (a 6x6x6 layer-2 grid); the config says 32^3 (4x4x4).
    real = tmp_path / "real.npy"
    save_volume(real, generate_volume((48, 48, 48), 5))
    source = cfg.ds.data_source.model_copy(update={"watershed": str(real)})
    cfg = cfg.model_copy(
        update={"dataset_config": cfg.ds.model_copy(update={"data_source": source})}
    )
    result = run_demo(cfg, tmp_path / "work", stages=["ingest"], advance="auto", timeout_s=180)
    setup = result.run.setups["ingest"]
    assert not result.ok and setup.phase == "failed", setup
    assert "layer-2 grid [6, 6, 6]" in setup.failure_reason
    assert "[4, 4, 4] planned by the controller" in setup.failure_reason
    assert result.alerts.get("setup_failed") == 1, result.alerts
    assert all(ls.phase == "waiting" and not ls.job.name for ls in result.run.layers.values())
