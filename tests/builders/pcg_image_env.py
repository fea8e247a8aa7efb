"""The environment of a PyChunkedGraph image's setup pod for the stand-ins of
tests/builders/pcg_image, run as a subprocess against the Bigtable emulator: the image on
PYTHONPATH, a 16^3 watershed in 8^3 chunks and the dataset file the setups read."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import yaml

from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "tests" / "builders" / "pcg_image"


def image_env(folder: Path) -> dict[str, str]:
    """The setup pod's environment, with its dataset file and watershed in `folder`."""
    volume = folder / "volume.npy"
    if not volume.exists():
        np.save(volume, np.arange(16**3, dtype=np.uint64).reshape(16, 16, 16))
    dataset = folder / "dataset.yml"
    dataset.write_text(
        yaml.safe_dump(
            {
                "data_source": {"WATERSHED": str(volume)},
                "graph_config": {"CHUNK_SIZE": [8, 8, 8], "FANOUT": 2},
                "backend_client": {"TYPE": "bigtable", "CONFIG": {"ADMIN": True}},
            }
        )
    )
    return {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{IMAGE}",
        "PCG_DATASET": str(dataset),
        "BIGTABLE_PROJECT": BIGTABLE_PROJECT,
        "BIGTABLE_INSTANCE": BIGTABLE_INSTANCE,
    }
