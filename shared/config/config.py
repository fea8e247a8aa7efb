"""Configuration: the models of `pipeline.yml` and the dataset file it names. Pure module.

`shared.config.config_files` reads and validates the files into these models (`load_config`).

The shape follows the predecessor (graph_id, dataset, images, bigtable, job with ramp and
resource curves, env, commands) plus what the event-driven controller adds (`controller`,
`project`, `workloads`). Unknown keys are errors, so a typo never passes silently.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.config.compute_class import check_compute_class
from shared.config.key_hints import did_you_mean
from shared.model.layers import layer2_shape_of
from shared.model.stages import SETUP_SUFFIX, STAGE_NAMES

AdvanceMode = Literal["manual", "approve", "auto"]


# `job.max_evictions_per_index`'s default (shared.reconcile.evictions counts them).
DEFAULT_MAX_EVICTIONS_PER_INDEX = 3
# `job.processes_per_vcpu` and `job.resources.pack` for a file in this project's shape: one
# process per vCPU and the curves' requests, so an existing config's pods do not change
# size or pool silently. A predecessor-shaped file gets the predecessor's newest defaults
# (cave-pipeline main), written into it by shared.config.config_compat.
DEFAULT_PROCESSES_PER_VCPU = 1
DEFAULT_PACK = False
PREDECESSOR_PROCESSES_PER_VCPU = 2
PREDECESSOR_PACK = True


class ConfigError(ValueError):
    """A config file is missing, unreadable or invalid; the message names file and field."""


class ConfigSourceUnreachable(ConnectionError):
    """Something the config names could not be fetched because its service did not answer
    (a gs:// watershed's `info` without a network); the message names the file, the key and
    the way out."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Curve(_Strict):
    """Per-layer request curve: `base * factor**(layer-2) + add`, capped at `max`."""

    base: float = Field(gt=0)
    factor: float = Field(default=1.0, gt=0)
    add: float = 0.0
    max: float | None = Field(default=None, gt=0)

    def at(self, layer: int) -> float:
        value = self.base * self.factor ** (layer - 2) + self.add
        return min(value, self.max) if self.max is not None else value


class LayerOverride(_Strict):
    cpu: float | None = Field(default=None, gt=0)
    memory: float | None = Field(default=None, gt=0)  # GiB


class Resources(_Strict):
    cpu: Curve = Curve(base=0.5)
    memory: Curve = Curve(base=1.0)  # GiB
    overrides: dict[int, LayerOverride] = {}
    # Grow each curve request to fill the node it already forces (shared/jobs/node_packing.py).
    # Off here (see DEFAULT_PACK); on for a predecessor-shaped file, as in the predecessor's
    # newest code. Per-layer overrides are never grown.
    pack: bool = DEFAULT_PACK


class Ramp(_Strict):
    """Parallelism starts at `start`, grows by `factor` every `period` seconds, up to `max`."""

    start: int = Field(default=2, ge=1)
    factor: float = Field(default=2.0, ge=1.0)
    period: float = Field(default=60.0, gt=0)
    max: int = Field(default=100, ge=1)


class JobSettings(_Strict):
    perm_seed: int = Field(default=42, ge=0)
    batch_size: int = Field(default=100, ge=1)
    task_retries: int = Field(default=3, ge=0)
    max_failed_tasks: int = Field(default=10, ge=0)
    compute_class: str = ""
    spot: bool = True
    lock_expiry_s: float = Field(default=180.0, gt=0)
    lock_expiry_factor: float = Field(default=2.0, ge=1.0)  # upper layers' chunks take longer
    # Worker pods (shared/jobs/worker_pod.py): PCG_N_PROCESSES = processes_per_vcpu x the layer's
    # whole billed vCPU (1 when parallel is off); burst leaves limits unset so pods may burst.
    # A whole number (the images parse it as an int); 0 and 1 both mean one per vCPU, as in
    # the predecessor. 1 here (see DEFAULT_PROCESSES_PER_VCPU); 2 for a predecessor-shaped
    # file, the predecessor's newest default (a builder blocks on Bigtable most of the time).
    parallel: bool = True
    processes_per_vcpu: int = Field(default=DEFAULT_PROCESSES_PER_VCPU, ge=0)
    burst: bool = True
    # After OOM kills, a layer's next attempt (a re-created Job) asks for this much more
    # memory, snapped to Autopilot; None: off (the memory stays the config's).
    oom_memory_factor: float | None = Field(default=None, gt=1.0)
    # Node-pressure evictions of one index (the Job retries them without end) before the
    # `index_evicted_repeatedly` alert and a raised memory for the next attempt.
    max_evictions_per_index: int = Field(default=DEFAULT_MAX_EVICTIONS_PER_INDEX, ge=1)
    # Right-sizing (docs/canary-and-rightsize.md): off, suggest (shown in status, run and the
    # report) or auto (applied to each next layer's Job); the margin over what pods used.
    rightsize: Literal["off", "suggest", "auto"] = "suggest"
    rightsize_margin: float = Field(default=1.25, ge=1.0)
    # The canary's margin over its pods' peak memory when it sizes a stage's layer 2.
    canary_margin: float = Field(default=1.25, ge=1.0)
    ramp: Ramp = Ramp()
    resources: Resources = Resources()

    @field_validator("compute_class", mode="before")
    @classmethod
    def _pod_billed(cls, v: str | None) -> str:
        return check_compute_class(v)  # shared/config/compute_class.py: why node-billed fail


class CurvePatch(_Strict):
    """A per-workload change to a request curve: only the keys given replace the job's (the
    predecessor's deep merge); `max: 0` lifts the job's cap (the predecessor's "uncapped").
    A null is "not given" (so a run's stored config reads back the same)."""

    base: float | None = Field(default=None, gt=0)
    factor: float | None = Field(default=None, gt=0)
    add: float | None = None
    max: float | None = Field(default=None, ge=0)


class ResourcesPatch(_Strict):
    cpu: CurvePatch | None = None
    memory: CurvePatch | None = None
    overrides: dict[int, LayerOverride] = {}
    pack: bool | None = None


class RampPatch(_Strict):
    start: int | None = Field(default=None, ge=1)
    factor: float | None = Field(default=None, ge=1.0)
    period: float | None = Field(default=None, gt=0)
    max: int | None = Field(default=None, ge=1)


def _given(value: Any) -> Any:
    """`value` without the null entries of its mappings, at every depth."""
    if isinstance(value, dict):
        return {k: _given(v) for k, v in value.items() if v is not None}
    return value


def deep_merge(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """`base` with `change` merged in key by key at every depth (a mapping in `change` merges
    into the mapping in `base`; any other value replaces it), as the predecessor merged
    `job.workloads.<stage>` into `job`."""
    out = dict(base)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class JobOverride(_Strict):
    """Per-workload overrides of any `job` field, deep-merged into `job`: omitted fields, and
    the omitted keys of `ramp` and `resources` (a curve's, an override layer's), keep the
    job's value (docs/predecessor-configs.md)."""

    perm_seed: int | None = Field(default=None, ge=0)
    batch_size: int | None = Field(default=None, ge=1)
    task_retries: int | None = Field(default=None, ge=0)
    max_failed_tasks: int | None = Field(default=None, ge=0)
    compute_class: str | None = None
    spot: bool | None = None
    lock_expiry_s: float | None = Field(default=None, gt=0)
    lock_expiry_factor: float | None = Field(default=None, ge=1.0)
    parallel: bool | None = None
    processes_per_vcpu: int | None = Field(default=None, ge=0)
    burst: bool | None = None
    oom_memory_factor: float | None = Field(default=None, gt=1.0)
    max_evictions_per_index: int | None = Field(default=None, ge=1)
    rightsize: Literal["off", "suggest", "auto"] | None = None
    rightsize_margin: float | None = Field(default=None, ge=1.0)
    canary_margin: float | None = Field(default=None, ge=1.0)
    ramp: RampPatch | None = None
    resources: ResourcesPatch | None = None

    @field_validator("compute_class")
    @classmethod
    def _pod_billed(cls, v: str | None) -> str | None:
        # Checked in the block too, so the error names job.workloads.<stage>.compute_class.
        return None if v is None else check_compute_class(v)


class JobConfig(JobSettings):
    workloads: dict[str, JobOverride] = {}

    def for_stage(self, stage: str) -> JobSettings:
        """The job settings of one stage: its `job.workloads.<stage>` block deep-merged into
        `job` (only the keys the block sets change; a ValidationError if the merge is not a
        valid `job`)."""
        base = {k: getattr(self, k) for k in JobSettings.model_fields}
        override = self.workloads.get(stage)
        if override is None:
            return JobSettings(**base)
        # Only what the block gives, at any depth: a null is "not given".
        changes = _given(override.model_dump(exclude_unset=True))
        merged = deep_merge(JobSettings(**base).model_dump(), changes)
        for curve in (merged.get("resources") or {}).values():
            if isinstance(curve, dict) and curve.get("max") == 0:
                curve["max"] = None  # `max: 0` in the block: uncapped
        return JobSettings(**merged)


class Bigtable(_Strict):
    project: str
    instance: str


class WorkloadIdentity(_Strict):
    """The pods' Kubernetes service accounts (Workload Identity binds each to a Google one):
    `ksa` runs the layer Jobs, `setup_ksa` the setup Jobs, which create the graph's table
    and so need more (Bigtable admin) than the workers (docs/deploying.md)."""

    ksa: str = "pipeline-worker"
    setup_ksa: str = "pipeline-setup"
    gsa_email: str = ""


class ControllerSettings(_Strict):
    """The `controller:` block: how runs advance, their budget, stall alerts, the tick."""

    advance: AdvanceMode = "approve"
    budget_usd: float | None = Field(default=None, gt=0)
    stall_after_s: float = Field(default=1800.0, gt=0)
    tick_period_s: float = Field(default=60.0, gt=0)
    # The vCPUs requested by the running layers of all the project's runs together (pods x
    # vCPU per pod); None: no cap beyond each layer's ramp.
    max_vcpus: float | None = Field(default=None, gt=0)
    # A running pod whose chunk progress has not moved for max(hung_after_chunks x the
    # layer's p95 chunk time, hung_floor_s) seconds is hung: deleted (its index is retried)
    # and alerted (docs/hung-workers.md).
    hung_after_chunks: float = Field(default=5.0, gt=0)
    hung_floor_s: float = Field(default=1800.0, gt=0)
    # The graph's Bigtable CPU load (0..1) above which the ramp holds; above it + 0.15 the
    # running layers step down one ramp step (docs/bigtable-ramp-and-bill.md).
    bigtable_cpu_max: float = Field(default=0.7, gt=0, le=1)
    # Before a stage's layer 2 runs wide, one Job builds this many of its chunks (one per
    # pod) to size the layer and forecast the build (docs/canary-and-rightsize.md); None: off.
    canary_chunks: int | None = Field(default=None, ge=1)


class DataSource(_Strict):
    # Volume size in voxels (x, y, z). Optional in the file: load_config reads it from the
    # watershed's info file when absent (shared/config/precomputed_info.py); given, it overrides.
    size: tuple[int, int, int] | None = None
    watershed: str = ""
    edges: str = ""
    components: str = ""
    # PyChunkedGraph's other upper-case keys (DATA_VERSION, CV_MIP, ...) pass through.
    model_config = ConfigDict(extra="allow", frozen=True)

    @field_validator("size")
    @classmethod
    def _positive(cls, v: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
        if v is not None and min(v) < 1:
            raise ValueError(f"every dimension must be >= 1, got {list(v)}")
        return v

    @model_validator(mode="after")
    def _only_upper_case_extras(self) -> DataSource:
        typos = [k for k in (self.model_extra or {}) if k != k.upper()]
        if typos:
            known = list(DataSource.model_fields)
            named = "; ".join(
                f"data_source.{k}: unknown key{did_you_mean(k, known, 'data_source.')}"
                for k in typos
            )
            raise ValueError(named)
        return self


# PyChunkedGraph's other graph_config keys (its meta.GraphConfig fields): passed through to the
# images' dataset file unchanged. Any other key would fail inside the image, so it is refused.
PCG_GRAPH_CONFIG_EXTRAS = ("ID", "OVERWRITE", "ROOT_LOCK_EXPIRY", "ROOT_COUNTERS")


class GraphConfig(_Strict):
    CHUNK_SIZE: tuple[int, int, int]
    FANOUT: Literal[2] = 2
    SPATIAL_BITS: int = Field(default=10, ge=1, le=16)
    LAYER_ID_BITS: Literal[8] = 8
    ID_PREFIX: str = ""
    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="after")
    def _only_pychunkedgraph_keys(self) -> GraphConfig:
        unknown = [k for k in (self.model_extra or {}) if k not in PCG_GRAPH_CONFIG_EXTRAS]
        if unknown:
            known = [*GraphConfig.model_fields, *PCG_GRAPH_CONFIG_EXTRAS]
            named = "; ".join(
                f"graph_config.{k}: not a PyChunkedGraph graph_config key"
                f"{did_you_mean(k, known, 'graph_config.')}"
                for k in unknown
            )
            raise ValueError(f"{named}; it has {', '.join(known)}")
        return self


class MeshConfig(_Strict):
    max_layer: int | None = Field(default=None, ge=2)
    # PyChunkedGraph's own mesh keys pass through to its workers.
    model_config = ConfigDict(extra="allow", frozen=True)


class Dataset(_Strict):
    data_source: DataSource
    graph_config: GraphConfig
    ingest_config: dict[str, Any] = {}
    mesh_config: MeshConfig | None = None
    l2cache_config: dict[str, Any] | None = None
    # PyChunkedGraph's own blocks, passed through to the images.
    backend_client: dict[str, Any] | None = None
    cave_config: dict[str, Any] | None = None


class PipelineConfig(_Strict):
    # What PyChunkedGraph accepts (its graph id is a Bigtable table id): letters of either case,
    # digits, `_`, `-`, `.`. Kubernetes names derived from it are sanitized and hashed.
    graph_id: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")
    dataset: str
    project: str = "local-demo"  # project of the Firestore and Pub/Sub resources
    region: str = "us-east1"
    zone: str = ""
    # terraform's default namespace (its own, with the pipeline's Roles); a predecessor-shaped
    # file keeps the predecessor's `default` (shared.config.config_compat).
    namespace: str = "cave-pipeline"
    images: dict[str, str] = {}
    bigtable: Bigtable
    workload_identity: WorkloadIdentity = WorkloadIdentity()
    job: JobConfig = JobConfig()
    env: dict[str, str] = {}
    commands: dict[str, list[str]] = {}
    workloads: dict[str, str] = {}  # stage -> "package.module:function" per-chunk plugin
    controller: ControllerSettings = ControllerSettings()
    # stage -> the layer `pipeline start` begins it at (the layers below were built before:
    # their done markers are checked); `--from-layer` overrides it. The predecessor's
    # `job.workloads.<stage>.start_layer` is read as this.
    start_layers: dict[str, int] = {}
    # Credential files for the worker pods' Secret (file name in the pod -> local file).
    secret_name: str = "cloud-volume-secrets"
    secret_files: dict[str, str] = {}
    # The folder `secret_files` paths resolve against: empty, pipeline.yml's folder; else a
    # folder relative to the working directory of `pipeline setup` (the predecessor's
    # `--secrets`, default `secrets`), or an absolute one.
    secrets_dir: str = ""

    # Filled by load_config; not part of the file.
    dataset_config: Dataset | None = None
    source_path: str = ""
    # The dataset file's fingerprint when it was loaded (shared.config.config_files
    # .fingerprint); a run stores it with its config, so `pipeline apply` and a re-submit see
    # that the file changed since (shared.operate.dataset_changes). "": not loaded from a
    # file, or a run stored before fingerprints were recorded.
    dataset_fingerprint: str = ""
    compat_notes: tuple[str, ...] = ()  # how a predecessor-style file was read
    # What the loaded files mean that differs from how they read, in either shape (a
    # mesh_config.max_layer past the root, `env:` keys replacing the controller's values).
    load_notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _known_stages(self) -> PipelineConfig:
        known = ", ".join(STAGE_NAMES)
        for field in ("images", "commands", "workloads"):
            for stage in getattr(self, field):
                if field == "commands" and stage.endswith(SETUP_SUFFIX):
                    stage = stage.removesuffix(SETUP_SUFFIX)  # a stage's setup command
                if stage not in STAGE_NAMES:
                    near = did_you_mean(stage, STAGE_NAMES, f"{field}.")
                    raise ValueError(f"{field}.{stage}: unknown stage{near}; one of {known}")
        for stage in self.job.workloads:
            if stage not in STAGE_NAMES:
                near = did_you_mean(stage, STAGE_NAMES, "job.workloads.")
                raise ValueError(f"job.workloads.{stage}: unknown stage{near}; one of {known}")
            try:
                self.job.for_stage(stage)
            except ValidationError as e:
                what = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
                )
                raise ValueError(
                    f"job.workloads.{stage}: merged into job it is not a valid job ({what})"
                ) from None
        for stage, layer in self.start_layers.items():
            if stage not in STAGE_NAMES:
                raise ValueError(f"start_layers.{stage}: unknown stage; expected one of {known}")
            if layer < 2:
                raise ValueError(f"start_layers.{stage}: {layer}; layers start at 2")
        return self

    @property
    def ds(self) -> Dataset:
        if self.dataset_config is None:
            raise ConfigError("dataset not loaded: use load_config()")
        return self.dataset_config

    def layer2_shape(self) -> tuple[int, int, int]:
        """Grid shape of layer 2: the volume cut into CHUNK_SIZE chunks."""
        size = self.ds.data_source.size
        if size is None:
            raise ConfigError("data_source.size: unknown (load the config with load_config)")
        return layer2_shape_of(size, self.ds.graph_config.CHUNK_SIZE)
