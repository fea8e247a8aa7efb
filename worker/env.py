"""The worker's environment (set by the Job manifest), parsed and validated.

The contract itself (names, dataclass, validation) lives in :mod:`shared.worker_contract`,
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

from collections.abc import Mapping

from shared.worker_contract import WorkerEnv, WorkerEnvError
from worker.errors import WorkerConfigError

__all__ = ["WorkerEnv", "parse_env"]


def parse_env(env: Mapping[str, str]) -> WorkerEnv:
    """Read and validate the worker environment; :class:`WorkerConfigError` names the
    offending variable."""
    try:
        return WorkerEnv.from_env(env)
    except WorkerEnvError as exc:
        raise WorkerConfigError(str(exc)) from None
