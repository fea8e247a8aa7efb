"""The worker's environment (set by the Job manifest), parsed and validated.

The contract itself (names, dataclass, validation) lives in :mod:`shared.model.worker_contract`,
where the manifest writes it from; this module turns its errors into the worker's.

Missing or malformed values raise :class:`~worker.errors.WorkerConfigError` naming the
variable (the worker then exits 42: retrying cannot fix configuration).

=========================  ========  ==========================================================
variable                   default   meaning
=========================  ========  ==========================================================
``PCG_GRAPH_ID``           required  graph id, also the Bigtable table id
``PCG_LAYER``              required  layer of this Job (>= 2, <= PCG_N_LAYERS)
``PCG_PERM_SEED``          required  shuffle seed (>= 0)
``PCG_BATCH_SIZE``         required  this layer's batch size, used as is (contract 1)
``PCG_GRID_SHAPE``         required  "X,Y,Z" grid of this layer (checked against the dataset
                                     and the graph metadata in the table, which wins)
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

from collections.abc import Mapping
from dataclasses import replace

from shared.model.graph_meta import GraphMeta
from shared.model.worker_contract import GRID_SHAPE, N_LAYERS, WorkerEnv, WorkerEnvError
from worker.errors import WorkerConfigError

__all__ = ["WorkerEnv", "parse_env", "with_graph_meta"]


def parse_env(env: Mapping[str, str]) -> WorkerEnv:
    """Read and validate the worker environment; :class:`WorkerConfigError` names the
    offending variable."""
    try:
        return WorkerEnv.from_env(env)
    except WorkerEnvError as exc:
        raise WorkerConfigError(str(exc)) from None


def with_graph_meta(env: WorkerEnv, meta: GraphMeta | None) -> WorkerEnv:
    """The worker's env with its geometry from the graph metadata its stage's setup wrote
    (as PyChunkedGraph's workers take theirs from the graph): the dataset's size and chunk
    size become the metadata's. Without metadata (a table set up before setups existed) the
    env's own geometry stands. A metadata grid other than `PCG_GRID_SHAPE` or a layer count
    other than `PCG_N_LAYERS` raises WorkerConfigError with both numbers."""
    if meta is None:
        return env
    from shared.jobs.layer_spec import layer_geometry  # numpy: see shared.model.worker_contract

    grid = tuple(int(v) for v in layer_geometry(meta.layer2_shape, env.layer, 1).grid_shape)
    if grid != tuple(env.grid_shape) or meta.layer_count != env.n_layers:
        raise WorkerConfigError(
            f"the graph metadata (bounds {list(meta.bounds_lo)}..{list(meta.bounds_hi)}, "
            f"chunk size {list(meta.chunk_size)}: layer-{env.layer} grid {list(grid)}, "
            f"{meta.layer_count} layers) disagrees with {GRID_SHAPE}="
            f"{','.join(map(str, env.grid_shape))}, {N_LAYERS}={env.n_layers}: the run was "
            "planned for another grid; fix data_source.size and start a new run"
        )
    source = {**env.dataset.get("data_source", {}), "size": list(meta.size)}
    graph = {**env.dataset.get("graph_config", {}), "CHUNK_SIZE": list(meta.chunk_size)}
    return replace(env, dataset={**env.dataset, "data_source": source, "graph_config": graph})
