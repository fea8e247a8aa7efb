"""A layer's spec: one stage and layer of a config, everything every other place needs of it.

Grid shape, chunk count, per-layer batch size, Job completions, snapped pod requests, lock
expiry and the Job name of an attempt are computed here and only here
(docs/architecture.md#one-home-per-contract, docs/job-and-worker-contract.md#chunk-distribution):
the manifest, the build plan, the controller's alerts, the worker's env check and the CLI ask
:func:`layer_spec` (or, where only the geometry is known, :func:`layer_geometry`) instead of
recomputing them. Pure module.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shared.jobs.autopilot import Requests, layer_requests
from shared.model import grid
from shared.model.layers import layer_count, layer_shape

if TYPE_CHECKING:  # annotations only: the worker imports this module without pydantic
    from shared.config.config import JobSettings, PipelineConfig

# Pods of an Indexed Job get the hostname "<job name>-<index>", a DNS label (<= 63): keep room
# for "-" and six index digits (a million batches) so the name alone never breaks pod creation.
MAX_JOB_NAME = 56
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

Shape = tuple[int, int, int]


class LayerRangeError(ValueError):
    """The layer is not one of the graph's (2..root); the message gives the valid range."""


def short_hash(text: str) -> str:
    """First six hex digits of sha256(text): a stable, name-safe suffix."""
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def job_name(graph_id: str, stage: str, layer: int, run_id: str) -> str:
    """Deterministic `pcg-<graph>-<stage>-l<layer>-<sha256(run_id)[:6]>`, a DNS label of at most
    MAX_JOB_NAME chars (graph part truncated): a re-create of a run's layer finds the same Job.
    """
    stage_part = stage.lower().replace("_", "-")
    tail = f"-{stage_part}-l{int(layer)}-{short_hash(run_id)}"
    budget = MAX_JOB_NAME - len("pcg-") - len(tail)
    graph = re.sub(r"[^a-z0-9-]", "-", graph_id.lower())[: max(budget, 0)].strip("-")
    name = f"pcg-{graph}{tail}" if graph else f"pcg{tail}"
    if not _DNS_LABEL.match(name) or len(name) > MAX_JOB_NAME:
        raise ValueError(f"cannot build a valid Job name from stage {stage!r}, layer {layer}")
    return name


def attempt_salt(run_id: str, attempt: int) -> str:
    """What a Job name hashes: the run id, plus the attempt once an operator re-submits."""
    return run_id if attempt == 0 else f"{run_id}/attempt-{attempt}"


def lock_expiry_s(job: JobSettings, layer: int) -> int:
    """Lock expiry at `layer` in whole seconds (rounded up: longer is the safe side)."""
    return math.ceil(job.lock_expiry_s * job.lock_expiry_factor ** (layer - 2))


@dataclass(frozen=True)
class LayerGeometry:
    """A layer's chunk grid and how it is cut into batches.

    See docs/job-and-worker-contract.md#chunk-distribution.
    """

    layer: int
    grid_shape: Shape
    base_batch_size: int  # `job.batch_size`, what PCG_BATCH_SIZE carries

    @property
    def chunks(self) -> int:
        return math.prod(self.grid_shape)

    @property
    def batch_size(self) -> int:
        """This layer's batch size: the base halved per layer above 2 (at least 1)."""
        return grid.layer_batch_size(self.base_batch_size, self.layer)

    @property
    def completions(self) -> int:
        """Number of batches, the Indexed Job's `completions`."""
        return grid.num_batches(self.grid_shape, self.batch_size)

    def batch_chunks(self, index: int, seed: int) -> np.ndarray:
        """The chunk coordinates of batch `index`, in processing order."""
        return grid.batch_coords(index, self.grid_shape, seed, self.batch_size)


def layer_geometry(
    layer2_shape: Shape, layer: int, base_batch_size: int, fanout: int = 2
) -> LayerGeometry:
    """The geometry of `layer` of a graph whose layer-2 grid is `layer2_shape`."""
    return LayerGeometry(layer, layer_shape(layer2_shape, layer, fanout), base_batch_size)


@dataclass(frozen=True)
class LayerSpec:
    """One stage and layer of a config: geometry, seed, requests, lock expiry, Job names."""

    graph_id: str
    stage: str
    n_layers: int  # the root layer
    geometry: LayerGeometry
    seed: int
    requests: Requests
    lock_expiry_s: int

    @property
    def layer(self) -> int:
        return self.geometry.layer

    @property
    def grid_shape(self) -> Shape:
        return self.geometry.grid_shape

    @property
    def chunks(self) -> int:
        return self.geometry.chunks

    @property
    def base_batch_size(self) -> int:
        return self.geometry.base_batch_size

    @property
    def batch_size(self) -> int:
        return self.geometry.batch_size

    @property
    def completions(self) -> int:
        return self.geometry.completions

    def job_name(self, run_id: str, attempt: int = 0) -> str:
        """The Job of `attempt` of this layer in run `run_id`: re-submits get a fresh, still
        deterministic name."""
        return job_name(self.graph_id, self.stage, self.layer, attempt_salt(run_id, attempt))

    def batch_chunks(self, index: int) -> list[tuple[int, int, int]]:
        """The chunks of batch `index`, in the order its pod processes them."""
        coords = self.geometry.batch_chunks(index, self.seed)
        return [tuple(int(v) for v in c) for c in coords]  # type: ignore[misc]


def layer_spec(cfg: PipelineConfig, stage: str, layer: int) -> LayerSpec:
    """The spec of `stage` at `layer`. LayerRangeError for a layer the graph does not have;
    ResourceLimitError (shared.jobs.autopilot) for requests past the compute class's ceiling."""
    l2, fanout = cfg.layer2_shape(), cfg.ds.graph_config.FANOUT
    n_layers = layer_count(l2, fanout)
    if not 2 <= layer <= n_layers:
        raise LayerRangeError(f"layer {layer}: out of range; this graph's layers are 2..{n_layers}")
    job = cfg.job.for_stage(stage)
    return LayerSpec(
        graph_id=cfg.graph_id,
        stage=stage,
        n_layers=n_layers,
        geometry=layer_geometry(l2, layer, job.batch_size, fanout),
        seed=job.perm_seed,
        requests=layer_requests(job, layer),
        lock_expiry_s=lock_expiry_s(job, layer),
    )
