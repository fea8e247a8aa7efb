"""What a reconcile reads and decides: the plan (what the config says about a run), the
snapshot (what was observed of it), the actions to take after the commit and the decision
that carries them with the new state. Pure data; `shared.reconcile.decide` decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.config.config import DEFAULT_MAX_EVICTIONS_PER_INDEX, Ramp
from shared.model.state import RunState
from shared.money.costs import Billing
from shared.ports.cluster import JobStatus, PodInfo
from shared.ports.graph_table import GraphTable
from shared.reconcile.canary import CanaryPlan
from shared.reconcile.completeness import LayerVerdict
from shared.reconcile.hung_pods import HungPod
from shared.reconcile.pod_accounting import PodRecord


@dataclass(frozen=True)
class LayerPlan:
    """What the config says about one layer: its size, ramp and per-pod requests, and the
    Job of its current attempt (name and rendered manifest, or why it cannot be rendered)."""

    completions: int
    ramp: Ramp
    cpu: float = 0.0
    memory_gib: float = 0.0
    job_name: str = ""
    # The rendered Job; the controller sets parallelism and suspension when it creates it.
    manifest: dict[str, Any] | None = field(default=None, compare=False)
    refusal: str = ""  # why the config renders no Job for this layer (manifest is None)
    max_evictions_per_index: int = DEFAULT_MAX_EVICTIONS_PER_INDEX  # shared.reconcile.evictions
    batch_chunks: int = 1  # chunks one pod of the layer processes (its batch)
    # Its pods' PCG_N_PROCESSES and the job.processes_per_vcpu it came from: an OOM alert's
    # advice (shared.reconcile.oom_advice).
    processes: int = 1
    processes_per_vcpu: int = 1
    # Its pods run PyChunkedGraph's root check after the chunk (shared.reconcile.root_check).
    root_check: bool = False
    # Its canary (controller.canary_chunks, a stage's layer 2 only; shared.reconcile.canary)
    canary: CanaryPlan | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SetupPlan:
    """A stage's setup pass: its Job (name and manifest, or why none renders) and the grid
    the graph metadata it writes must agree with (layer-2 chunk grid, layer count)."""

    job_name: str
    manifest: dict[str, Any] | None = field(default=None, compare=False)
    refusal: str = ""
    layer2_shape: tuple[int, int, int] = (1, 1, 1)
    layer_count: int = 2
    fanout: int = 2
    # The setup's pod prints the graph's metadata as its image reads it (the graph probe):
    # a completed setup without that report failed.
    probes_graph: bool = False
    # The graph's table the setup must leave its metadata in (docs/setup-passes.md).
    table_id: str = ""
    project: str = ""
    instance: str = ""
    # PyChunkedGraph's ingest setup: refused on a table without the graph's metadata.
    pcg_ingest: bool = False
    # The run's dataset ConfigMap its pod mounts (PCG_DATASET), written before its Job is
    # created; None where no Job renders.
    config_map: dict[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Plan:
    """What the config says about a run: each layer's plan (by layer key), each stage's
    setup pass (by stage), when a layer counts as stalled, and how the run is billed (None:
    no budget guard)."""

    layers: dict[str, LayerPlan]
    stall_after_s: float = 1800.0
    billing: Billing | None = None
    # controller.max_vcpus: the cap on pods x vCPU over the running layers of all the
    # project's runs (None: no cap).
    max_vcpus: float | None = None
    setups: dict[str, SetupPlan] = field(default_factory=dict)
    # controller.bigtable_cpu_max: the instance load above which the ramp holds (None: no
    # gate; shared.reconcile.bigtable_load).
    bigtable_cpu_max: float | None = None


@dataclass(frozen=True)
class Snapshot:
    """What was observed of a run: its stored state, each running layer's Job (None: no
    such Job) and that Job's pods, by Job name."""

    run: RunState
    jobs: dict[str, JobStatus | None] = field(default_factory=dict)
    pods: dict[str, list[PodInfo]] = field(default_factory=dict)
    # vCPUs requested by the running layers of the project's other running runs (their
    # stored parallelism x vCPU per pod), read only when the plan has a max_vcpus.
    others_vcpus: float = 0.0
    # The log of each completed setup Job's pod, by Job name: the graph metadata it reports.
    setup_logs: dict[str, str] = field(default_factory=dict)
    # The graph's table, read when a setup pass is about to start or has completed
    # (`shared.reconcile.setup_step.needs_graph_table`); None: not read in this reconcile.
    graph_table: GraphTable | None = None
    # Running pods found hung (shared.reconcile.hung_pods), by layer key.
    hung: dict[str, list[HungPod]] = field(default_factory=dict)
    # The ledger check of each running layer whose Job is Complete, by layer key (stages whose
    # workers write done markers; shared.reconcile.completeness, docs/verify.md).
    ledger_checks: dict[str, LayerVerdict] = field(default_factory=dict)
    # The graph's Bigtable instance CPU load (0..1), read while layers run (None: not read or
    # not known; shared.reconcile.bigtable_load).
    bigtable_load: float | None = None
    # How late that load shows a change (the monitor's `load_lag_s`; 0: at once).
    bigtable_load_lag_s: float = 0.0
    # The log tails of a finished canary's succeeded pods, by pod name (shared.reconcile.canary).
    canary_logs: dict[str, str] = field(default_factory=dict)
    # The log tail of the first pod to succeed in a running layer, by layer key, read in
    # the reconcile that first sees one: its process's start-up (`Timing.process_start_s`).
    first_pod_logs: dict[str, str] = field(default_factory=dict)
    # The finished Jobs whose pods' lifetime usage was read from monitoring this reconcile
    # (shared.ports.pod_usage; GKE): their earlier-recorded pods' figures are kept as the layer
    # closes.
    usage_read: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CreateJob:
    stage: str
    layer: int
    job_name: str
    parallelism: int
    suspend: bool = False


@dataclass(frozen=True)
class PatchJob:
    job_name: str
    parallelism: int | None = None
    suspend: bool | None = None


@dataclass(frozen=True)
class DeleteJob:
    job_name: str


@dataclass(frozen=True)
class DeletePod:
    """Delete one pod of a Job (a hung worker): the Job retries its index."""

    job_name: str
    pod_name: str


@dataclass(frozen=True)
class ResizePod:
    """Resize a running pod's container in place to `resources` (its whole `resources`
    block, as the layer's Job would render it now; shared.reconcile.resize)."""

    job_name: str
    pod_name: str
    container: str
    resources: dict[str, dict[str, str]] = field(compare=False)


@dataclass(frozen=True)
class ApplyConfigMap:
    """Create or replace the ConfigMap the Job `job_name` mounts (a setup pass's dataset
    file): emitted just before that Job's creation, dropped with it if it is refused."""

    job_name: str
    manifest: dict[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True)
class Alert:
    """An alert for the `alerts` topic; `kind` becomes the message attribute."""

    kind: str
    stage: str = ""
    layer: int = 0
    details: dict[str, Any] = field(default_factory=dict)


Action = CreateJob | PatchJob | DeleteJob | DeletePod | ResizePod | ApplyConfigMap | Alert


@dataclass
class Decision:
    """The new state, the side effects to perform after committing it, the pod attempts to
    record, and whether the state differs from what was read (nothing to commit if not)."""

    state: RunState
    actions: list[Action]
    at: datetime  # the `now` it was decided at
    pod_records: dict[str, list[PodRecord]] = field(default_factory=dict)
    changed: bool = False
    # Config versions to record with the commit (shared.reconcile.rightsize_version).
    config_versions: list[dict[str, Any]] = field(default_factory=list)
    # The run has more to do at once: a canary ended and changed its layer's size, and the
    # layer's Job (or its approval request) is planned at the new size by the next pass.
    # The reconciler runs that pass right after acting, not at the next trigger (a tick).
    again: bool = False
