"""The worker's environment (set by the Job manifest), parsed and validated.

Missing or malformed values raise :class:`~worker.errors.WorkerConfigError` naming the
variable (the worker then exits 42: retrying cannot fix configuration).

=========================  ========  ==========================================================
variable                   default   meaning
=========================  ========  ==========================================================
``PCG_GRAPH_ID``           required  graph id, also the Bigtable table id
``PCG_LAYER``              required  layer of this Job (>= 2, <= PCG_N_LAYERS)
``PCG_PERM_SEED``          required  shuffle seed (>= 0)
``PCG_BATCH_SIZE``         required  this layer's batch size, used as is (contract 1)
``PCG_GRID_SHAPE``         required  "X,Y,Z" grid of this layer (checked against the dataset)
``PCG_N_LAYERS``           required  root layer
``PCG_DATASET_JSON``       required  the dataset config as a JSON object
``BIGTABLE_PROJECT``       required  Bigtable project
``BIGTABLE_INSTANCE``      required  Bigtable instance
``JOB_COMPLETION_INDEX``   required  batch index (set by Kubernetes)
``PCG_N_PROCESSES``        1         accepted for PyChunkedGraph images; chunks run one by one
``PCG_STAGE``              ingest    stage name
``PCG_RUN_ID``             ""        run id (logged on every line)
``PCG_WORKLOAD``           required  plugin ``package.module:function``
``PCG_LOCK_EXPIRY_S``      180       claim expiry, set on the kvdbclient client
``PCG_TERM_GRACE_S``       15        after SIGTERM, how long the current chunk may still run
``PCG_LOG_LEVEL``          INFO      DEBUG adds a line per chunk (read by ``worker.__main__``)
=========================  ========  ==========================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.grid import num_batches
from shared.layers import layer_shape
from worker.errors import WorkerConfigError

__all__ = ["WorkerEnv", "parse_env"]


@dataclass(frozen=True)
class WorkerEnv:
    """The worker's configuration, read from the Job's environment by :func:`parse_env`."""

    graph_id: str
    layer: int
    seed: int
    # This layer's own batch size, `max(1, base // 2**(L-2))` computed by the controller:
    # PyChunkedGraph images use PCG_BATCH_SIZE as is, so the worker does too.
    batch_size: int
    n_processes: int
    grid_shape: tuple[int, int, int]
    stage: str
    run_id: str
    workload: str
    n_layers: int
    lock_expiry_s: float
    project: str
    instance: str
    dataset: dict[str, Any]
    index: int
    term_grace_s: float = 15.0

    @property
    def layer_batch_size(self) -> int:
        """This layer's batch size: PCG_BATCH_SIZE as given (never halved again here)."""
        return self.batch_size

    @property
    def spatial_bits(self) -> int:
        return int(self.dataset.get("graph_config", {}).get("SPATIAL_BITS", 10))


def _get(env: Mapping[str, str], name: str, default: str | None = None) -> str:
    value = env.get(name, default)
    if value is None or value.strip() == "":
        raise WorkerConfigError(f"{name} is not set: the Job manifest must set it")
    return value.strip()


def _int(env: Mapping[str, str], name: str, low: int, default: str | None = None) -> int:
    raw = _get(env, name, default)
    try:
        value = int(raw)
    except ValueError:
        raise WorkerConfigError(f"{name}={raw!r} is not an integer") from None
    if value < low:
        raise WorkerConfigError(f"{name}={value} is out of range: must be >= {low}")
    return value


def _float(env: Mapping[str, str], name: str, default: str) -> float:
    raw = _get(env, name, default)
    try:
        value = float(raw)
    except ValueError:
        raise WorkerConfigError(f"{name}={raw!r} is not a number") from None
    if not value > 0:
        raise WorkerConfigError(f"{name}={raw} must be > 0 seconds")
    return value


def _check_grid(grid: tuple[int, int, int], layer: int, dataset: dict[str, Any]) -> None:
    """Refuse a grid shape that disagrees with the dataset geometry (when it has one)."""
    try:
        size = [int(v) for v in dataset["data_source"]["size"]]
        chunk = [int(v) for v in dataset["graph_config"]["CHUNK_SIZE"]]
    except (KeyError, TypeError, ValueError):
        return  # a dataset without geometry: trust PCG_GRID_SHAPE
    l2 = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
    expected = layer_shape(l2, layer)  # type: ignore[arg-type]
    if tuple(grid) != tuple(expected):
        raise WorkerConfigError(
            f"PCG_GRID_SHAPE={','.join(map(str, grid))} disagrees with PCG_DATASET_JSON "
            f"(size {size}, CHUNK_SIZE {chunk} give {','.join(map(str, expected))} at layer "
            f"{layer}): re-render the Job from the current config"
        )


def parse_env(env: Mapping[str, str]) -> WorkerEnv:
    """Read and validate the worker environment; :class:`WorkerConfigError` names the
    offending variable."""
    raw_grid = _get(env, "PCG_GRID_SHAPE")
    try:
        grid = tuple(int(v) for v in raw_grid.split(","))
    except ValueError:
        grid = ()
    if len(grid) != 3 or min(grid) < 1:
        raise WorkerConfigError(f"PCG_GRID_SHAPE={raw_grid!r} must be 'X,Y,Z' with X,Y,Z >= 1")
    raw_ds = _get(env, "PCG_DATASET_JSON")
    try:
        dataset = json.loads(raw_ds)
    except json.JSONDecodeError as exc:
        raise WorkerConfigError(f"PCG_DATASET_JSON is not valid JSON: {exc}") from None
    if not isinstance(dataset, dict):
        raise WorkerConfigError("PCG_DATASET_JSON must be a JSON object (the dataset config)")
    stage = _get(env, "PCG_STAGE", "ingest")
    workload = env.get("PCG_WORKLOAD", "").strip()
    if not workload:
        # No fallback: a production stage must never run a demo workload by accident.
        raise WorkerConfigError(
            f"PCG_WORKLOAD is not set for stage {stage!r}: name the per-chunk plugin in the "
            f"config (workloads.{stage}: package.module:function)"
        )
    cfg = WorkerEnv(
        graph_id=_get(env, "PCG_GRAPH_ID"),
        layer=_int(env, "PCG_LAYER", 2),
        seed=_int(env, "PCG_PERM_SEED", 0),
        batch_size=_int(env, "PCG_BATCH_SIZE", 1),
        n_processes=_int(env, "PCG_N_PROCESSES", 1, "1"),
        grid_shape=grid,  # type: ignore[arg-type]
        stage=stage,
        run_id=env.get("PCG_RUN_ID", "").strip(),
        workload=workload,
        n_layers=_int(env, "PCG_N_LAYERS", 2),
        lock_expiry_s=_float(env, "PCG_LOCK_EXPIRY_S", "180"),
        project=_get(env, "BIGTABLE_PROJECT"),
        instance=_get(env, "BIGTABLE_INSTANCE"),
        dataset=dataset,
        index=_int(env, "JOB_COMPLETION_INDEX", 0),
        term_grace_s=_float(env, "PCG_TERM_GRACE_S", "15"),
    )
    if cfg.layer > cfg.n_layers:
        raise WorkerConfigError(f"PCG_LAYER={cfg.layer} exceeds PCG_N_LAYERS={cfg.n_layers}")
    n_batches = num_batches(cfg.grid_shape, cfg.layer_batch_size)
    if cfg.index >= n_batches:
        raise WorkerConfigError(
            f"JOB_COMPLETION_INDEX={cfg.index} is past the last batch: the layer has "
            f"{n_batches} batches (grid {raw_grid}, batch size {cfg.layer_batch_size})"
        )
    _check_grid(cfg.grid_shape, cfg.layer, dataset)
    return cfg
