"""The environment a Job's pod gives `python -m worker`, for tests that run workers as plain
subprocesses (the e2e tests get theirs from the rendered manifest instead)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from shared.grid import layer_batch_size
from shared.layers import layer_count, layer_shape
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

REPO = Path(__file__).resolve().parents[2]


def worker_env(
    table_id: str,
    dataset: dict[str, Any],
    *,
    stage: str,
    layer: int,
    index: int,
    batch_size: int,
    seed: int,
    l2_shape: tuple[int, int, int],
    **extra: str | None,
) -> dict[str, str]:
    """os.environ plus the worker's variables; `extra` overrides them (None removes one).

    `batch_size` is the config's base size; the pod gets the layer's own, as the manifest
    renders it.
    """
    env: dict[str, str | None] = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "PCG_GRAPH_ID": table_id,
        "PCG_LAYER": str(layer),
        "PCG_PERM_SEED": str(seed),
        "PCG_BATCH_SIZE": str(layer_batch_size(batch_size, layer)),
        "PCG_N_PROCESSES": "1",
        "PCG_GRID_SHAPE": ",".join(map(str, layer_shape(l2_shape, layer))),
        "PCG_STAGE": stage,
        "PCG_RUN_ID": f"test-{stage}",
        "PCG_N_LAYERS": str(layer_count(l2_shape)),
        "PCG_LOCK_EXPIRY_S": "60",
        "BIGTABLE_PROJECT": BIGTABLE_PROJECT,
        "BIGTABLE_INSTANCE": BIGTABLE_INSTANCE,
        "PCG_DATASET_JSON": json.dumps(dataset),
        "JOB_COMPLETION_INDEX": str(index),
        # The demo's plugin of the stage (there is no default); not the shell's.
        "PCG_WORKLOAD": f"demo.{stage}:process_chunk",
        "PCG_SOURCE_GRAPH_ID": None,
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}
