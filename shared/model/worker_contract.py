"""The worker contract: the env a Job gives its pods, and the worker's log record.

See docs/job-and-worker-contract.md#worker-env.

:class:`WorkerEnv` is written by the manifest (:meth:`WorkerEnv.to_env`) and read by the
worker (:meth:`WorkerEnv.from_env`, through ``worker.env.parse_env``); a bad value raises
:class:`WorkerEnvError` naming the variable. The predecessor's names (``PCG_GRAPH_ID``,
``PCG_LAYER``, ``PCG_PERM_SEED``, ``PCG_BATCH_SIZE``, ``PCG_N_PROCESSES``) are kept so
PyChunkedGraph images built for it run unchanged. :data:`LOG` names the fields of a worker's
JSON log line, written by ``worker.logs`` and read by the CLI and the alerts. Pure module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.model import lock_renewal
from shared.model.layers import layer2_shape_of, layer_shape

# The worker imports this module (for LOG) before it blocks SIGTERM in every thread; numpy,
# which the layer geometry needs, starts OpenBLAS threads at import that would not inherit
# that mask, and a SIGTERM landing on one kills the pod. So numpy loads on first use only.

GRAPH_ID = "PCG_GRAPH_ID"
LAYER = "PCG_LAYER"
PERM_SEED = "PCG_PERM_SEED"
# The layer's own batch size, max(1, base // 2**(L-2)): PyChunkedGraph images use it as is.
BATCH_SIZE = "PCG_BATCH_SIZE"
N_PROCESSES = "PCG_N_PROCESSES"
GRID_SHAPE = "PCG_GRID_SHAPE"  # explicit so operator and worker can never disagree on N
STAGE = "PCG_STAGE"
RUN_ID = "PCG_RUN_ID"
WORKLOAD = "PCG_WORKLOAD"
N_LAYERS = "PCG_N_LAYERS"
LOCK_EXPIRY_S = "PCG_LOCK_EXPIRY_S"
BIGTABLE_PROJECT = "BIGTABLE_PROJECT"
BIGTABLE_INSTANCE = "BIGTABLE_INSTANCE"
DATASET_JSON = "PCG_DATASET_JSON"
# PyChunkedGraph images renew a chunk claim every 60 s x (L-1) x PCG_LOCK_EXPIRY_SCALE; the
# claim itself lives for the graph's ROOT_LOCK_EXPIRY (3 min), whatever the scale. Written per
# layer so the renewal is at most a third of that lifetime (shared.model.lock_renewal); the
# operator's `env` may set it instead (docs/images-chunk-lock.md).
LOCK_EXPIRY_SCALE = lock_renewal.SCALE_ENV
# Mounts (contract 3): the credential files of the Secret, the dataset file of the ConfigMap.
# PyChunkedGraph images run as root and read ~/.cloudvolume/secrets, i.e. under /root; our
# worker image runs as uid 10001 with HOME=/home/worker (worker.Dockerfile), which cannot
# enter /root (mode 0700), so its pods get the Secret under that home instead.
SECRETS_DIR = "/root/.cloudvolume/secrets"
WORKER_UID = 10001
WORKER_HOME = "/home/worker"
WORKER_SECRETS_DIR = f"{WORKER_HOME}/.cloudvolume/secrets"
GOOGLE_SECRET = "google-secret.json"
CAVE_SECRET = "cave-secret.json"
GOOGLE_CREDENTIALS = "GOOGLE_APPLICATION_CREDENTIALS"
DATASET_DIR = "/app/datasets"
DATASET_FILE = "dataset.yml"
DATASET_PATH = "PCG_DATASET"  # where the setups (and workers) find the dataset file
# The l2cache workers' target, from the dataset's l2cache_config (the predecessor's names).
L2CACHE_ENV = {"L2CACHE_CV_PATH": "cv_path", "L2CACHE_TABLE_ID": "table_id"}
# The layer's Job attempt (set only on re-submits): part of the claim lineage, so a new Job's
# pods never take over claims of the earlier Job's pods (worker.claim_tokens).
JOB_ATTEMPT = "PCG_JOB_ATTEMPT"
TERM_GRACE_S = "PCG_TERM_GRACE_S"  # the operator's knob (config `env`), default below
COMPLETION_INDEX = "JOB_COMPLETION_INDEX"  # set per pod by Kubernetes, never by the manifest

DEFAULT_TERM_GRACE_S = 15.0
# Pods of an image's own entry point (shared/jobs/image_pods.py): their harness installs no
# SIGTERM handler, so they get a short grace; PyChunkedGraph's profiler is pinned off.
IMAGE_GRACE_S = 5
PROFILER_ENV = "PCG_PROFILER_ENABLED"
# What the controller sets for every Job: config `env` may not shadow these (PCG_N_PROCESSES,
# set per layer from job.processes_per_vcpu, is refused with its own message).
RESERVED = frozenset(
    {
        GRAPH_ID,
        LAYER,
        PERM_SEED,
        BATCH_SIZE,
        GRID_SHAPE,
        STAGE,
        RUN_ID,
        WORKLOAD,
        N_LAYERS,
        LOCK_EXPIRY_S,
        BIGTABLE_PROJECT,
        BIGTABLE_INSTANCE,
        DATASET_JSON,
        DATASET_PATH,
        JOB_ATTEMPT,
    }
)


class WorkerEnvError(ValueError):
    """A worker variable is missing or malformed; the message names it and the fix."""


@dataclass(frozen=True)
class LogFields:
    """Field names of a worker's JSON log line (one object per line on stdout)."""

    severity: str = "severity"
    message: str = "message"
    time: str = "time"
    run: str = "run"
    stage: str = "stage"
    layer: str = "layer"
    index: str = "index"
    chunk: str = "chunk"  # "3_(46, 5, 29)"
    coord: str = "coord"
    traceback: str = "traceback"
    exit_code: str = "exit_code"


LOG = LogFields()


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class WorkerEnv:
    """The worker's configuration: what a Job's env says, parsed and validated."""

    graph_id: str
    layer: int
    seed: int
    batch_size: int  # this layer's own batch size (what completions were computed from)
    n_processes: int
    grid_shape: tuple[int, int, int]
    stage: str
    run_id: str
    workload: str  # "" only for stages that bring their own command (never parsed back)
    n_layers: int
    lock_expiry_s: float
    project: str
    instance: str
    dataset: dict[str, Any]
    index: int = 0  # JOB_COMPLETION_INDEX
    term_grace_s: float = DEFAULT_TERM_GRACE_S
    job_attempt: int = 0  # the layer's re-submits (PCG_JOB_ATTEMPT, written only when > 0)

    @property
    def layer_batch_size(self) -> int:
        """This layer's batch size: PCG_BATCH_SIZE as given (never halved again here)."""
        return self.batch_size

    @property
    def completions(self) -> int:
        """Number of batches of this layer (the Job's completions)."""
        from shared.model.grid import num_batches  # numpy: see the imports

        return num_batches(self.grid_shape, self.batch_size)

    @property
    def image_lock_scale(self) -> float:
        """`PCG_LOCK_EXPIRY_SCALE` for this layer: PyChunkedGraph images then renew a claim at
        most every third of its lifetime (the dataset's graph_config.ROOT_LOCK_EXPIRY, else
        3 min). Unrelated to `lock_expiry_s`, our own worker's claim time-to-live."""
        lifetime = lock_renewal.claim_lifetime_s(self.dataset)
        return lock_renewal.safe_scale(self.layer, lifetime)

    @property
    def spatial_bits(self) -> int:
        return int(self.dataset.get("graph_config", {}).get("SPATIAL_BITS", 10))

    def to_env(self) -> dict[str, str]:
        """The variables the manifest writes, in manifest order. JOB_COMPLETION_INDEX is
        Kubernetes' to set; PCG_TERM_GRACE_S only when it differs from the default, and
        PCG_JOB_ATTEMPT only on a re-submitted layer's Job."""
        dataset = json.dumps(self.dataset, separators=(",", ":"), sort_keys=True)
        env = {
            GRAPH_ID: self.graph_id,
            LAYER: str(self.layer),
            PERM_SEED: str(self.seed),
            BATCH_SIZE: str(self.batch_size),
            N_PROCESSES: str(self.n_processes),
            GRID_SHAPE: ",".join(map(str, self.grid_shape)),
            STAGE: self.stage,
            RUN_ID: self.run_id,
            **({WORKLOAD: self.workload} if self.workload else {}),
            N_LAYERS: str(self.n_layers),
            LOCK_EXPIRY_S: _seconds(self.lock_expiry_s),
            LOCK_EXPIRY_SCALE: repr(self.image_lock_scale),
            BIGTABLE_PROJECT: self.project,
            BIGTABLE_INSTANCE: self.instance,
            DATASET_JSON: dataset,
        }
        if self.term_grace_s != DEFAULT_TERM_GRACE_S:
            env[TERM_GRACE_S] = _seconds(self.term_grace_s)
        if self.job_attempt:
            env[JOB_ATTEMPT] = str(self.job_attempt)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerEnv:
        """Read and validate a worker's env; WorkerEnvError names the offending variable."""
        raw_grid = _get(env, GRID_SHAPE)
        try:
            grid = tuple(int(v) for v in raw_grid.split(","))
        except ValueError:
            grid = ()
        if len(grid) != 3 or min(grid) < 1:
            raise WorkerEnvError(f"{GRID_SHAPE}={raw_grid!r} must be 'X,Y,Z' with X,Y,Z >= 1")
        dataset = _dataset(env)
        stage = _get(env, STAGE, "ingest")
        workload = env.get(WORKLOAD, "").strip()
        if not workload:
            # No fallback: a production stage must never run a demo workload by accident.
            raise WorkerEnvError(
                f"{WORKLOAD} is not set for stage {stage!r}: name the per-chunk plugin in the "
                f"config (workloads.{stage}: package.module:function)"
            )
        parsed = cls(
            graph_id=_get(env, GRAPH_ID),
            layer=_int(env, LAYER, 2),
            seed=_int(env, PERM_SEED, 0),
            batch_size=_int(env, BATCH_SIZE, 1),
            n_processes=_int(env, N_PROCESSES, 1, "1"),
            grid_shape=grid,  # type: ignore[arg-type]
            stage=stage,
            run_id=env.get(RUN_ID, "").strip(),
            workload=workload,
            n_layers=_int(env, N_LAYERS, 2),
            lock_expiry_s=_float(env, LOCK_EXPIRY_S, "180"),
            project=_get(env, BIGTABLE_PROJECT),
            instance=_get(env, BIGTABLE_INSTANCE),
            dataset=dataset,
            index=_int(env, COMPLETION_INDEX, 0),
            term_grace_s=_float(env, TERM_GRACE_S, _seconds(DEFAULT_TERM_GRACE_S)),
            job_attempt=_int(env, JOB_ATTEMPT, 0, "0"),
        )
        parsed._check(raw_grid)
        return parsed

    def _check(self, raw_grid: str) -> None:
        if self.layer > self.n_layers:
            raise WorkerEnvError(f"{LAYER}={self.layer} exceeds {N_LAYERS}={self.n_layers}")
        n_batches = self.completions
        if self.index >= n_batches:
            raise WorkerEnvError(
                f"{COMPLETION_INDEX}={self.index} is past the last batch: the layer has "
                f"{n_batches} batches (grid {raw_grid}, batch size {self.layer_batch_size})"
            )
        _check_grid(self.grid_shape, self.layer, self.dataset)


def setup_env(
    *,
    graph_id: str,
    stage: str,
    run_id: str,
    workload: str,
    layer2_shape: tuple[int, int, int],
    n_layers: int,
    project: str,
    instance: str,
    dataset: dict[str, Any],
) -> dict[str, str]:
    """The env of a stage's setup pod: the graph, the planned grid (layer 2) and layer count
    the setup writes into the graph's metadata, the table's instance and the dataset."""
    env = {
        GRAPH_ID: graph_id,
        STAGE: stage,
        RUN_ID: run_id,
        **({WORKLOAD: workload} if workload else {}),
        GRID_SHAPE: ",".join(map(str, layer2_shape)),
        N_LAYERS: str(n_layers),
        BIGTABLE_PROJECT: project,
        BIGTABLE_INSTANCE: instance,
        DATASET_JSON: json.dumps(dataset, separators=(",", ":"), sort_keys=True),
    }
    return env


def _get(env: Mapping[str, str], name: str, default: str | None = None) -> str:
    value = env.get(name, default)
    if value is None or value.strip() == "":
        raise WorkerEnvError(f"{name} is not set: the Job manifest must set it")
    return value.strip()


def _int(env: Mapping[str, str], name: str, low: int, default: str | None = None) -> int:
    raw = _get(env, name, default)
    try:
        value = int(raw)
    except ValueError:
        raise WorkerEnvError(f"{name}={raw!r} is not an integer") from None
    if value < low:
        raise WorkerEnvError(f"{name}={value} is out of range: must be >= {low}")
    return value


def _float(env: Mapping[str, str], name: str, default: str) -> float:
    raw = _get(env, name, default)
    try:
        value = float(raw)
    except ValueError:
        raise WorkerEnvError(f"{name}={raw!r} is not a number") from None
    if not value > 0:
        raise WorkerEnvError(f"{name}={raw} must be > 0 seconds")
    return value


def _dataset(env: Mapping[str, str]) -> dict[str, Any]:
    raw = _get(env, DATASET_JSON)
    try:
        dataset = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise WorkerEnvError(f"{DATASET_JSON} is not valid JSON: {exc}") from None
    if not isinstance(dataset, dict):
        raise WorkerEnvError(f"{DATASET_JSON} must be a JSON object (the dataset config)")
    return dataset


def _check_grid(grid: tuple[int, int, int], layer: int, dataset: dict[str, Any]) -> None:
    """Refuse a grid shape that disagrees with the dataset geometry (when it has one)."""
    try:
        size = [int(v) for v in dataset["data_source"]["size"]]
        chunk = [int(v) for v in dataset["graph_config"]["CHUNK_SIZE"]]
        l2 = layer2_shape_of(tuple(size), tuple(chunk))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return  # a dataset without geometry: trust PCG_GRID_SHAPE
    expected = layer_shape(l2, layer)
    if tuple(grid) != tuple(expected):
        raise WorkerEnvError(
            f"{GRID_SHAPE}={','.join(map(str, grid))} disagrees with {DATASET_JSON} "
            f"(size {size}, CHUNK_SIZE {chunk} give {','.join(map(str, expected))} at layer "
            f"{layer}): re-render the Job from the current config"
        )
