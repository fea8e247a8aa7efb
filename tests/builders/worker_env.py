"""The environment a Job's pod gives `python -m worker`, for tests that run workers as plain
subprocesses (the e2e tests get theirs from the rendered manifest instead)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from shared.jobs.layer_spec import layer_geometry
from shared.model.layers import layer_count
from shared.model.worker_contract import COMPLETION_INDEX, WorkerEnv
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
    geometry = layer_geometry(l2_shape, layer, batch_size)
    contract = WorkerEnv(
        graph_id=table_id,
        layer=layer,
        seed=seed,
        batch_size=geometry.batch_size,
        n_processes=1,
        grid_shape=geometry.grid_shape,
        stage=stage,
        run_id=f"test-{stage}",
        # The demo's plugin of the stage (there is no default); not the shell's.
        workload=f"demo.{stage}:process_chunk",
        n_layers=layer_count(l2_shape),
        lock_expiry_s=60,
        project=BIGTABLE_PROJECT,
        instance=BIGTABLE_INSTANCE,
        dataset=dataset,
        index=index,
    )
    env: dict[str, str | None] = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        **contract.to_env(),
        COMPLETION_INDEX: str(index),
        "PCG_SOURCE_GRAPH_ID": None,
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}
