"""Run and layer state as stored in Firestore: dataclasses and the layer gating. Pure module.

A run is a set of stages (`shared.model.stages`), each a sequence of layers. Each layer is one
Indexed Job. The run document carries a `version` that every state transition bumps under a
precondition, so two reconciles of one run can never both apply a transition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any

from shared.model.stages import FIRST_LAYER, dependencies_in

SETUP_LAYER = 0  # a setup Job's layer (label, CreateJob, `pipeline submit RUN STAGE 0`)
RUN_STATUSES = ("running", "paused", "succeeded", "failed")
RUN_ENDED = ("succeeded", "failed")  # the controller no longer acts (a re-submit revives)
LAYER_PHASES = ("waiting", "running", "succeeded", "failed")


def layer_key(stage: str, layer: int) -> str:
    """Document id of a layer: `ingest-L3`."""
    return f"{stage}-L{layer}"


@dataclass
class LayerState:
    """One layer of one stage: its state machine, approval, Job and progress."""

    stage: str
    layer: int
    phase: str = "waiting"
    approved: bool = False
    approved_by: str = ""
    approved_at: datetime | None = None
    attempt: int = 0  # bumped by each operator re-submit; part of the Job name
    job_name: str = ""
    completions: int = 0
    parallelism: int = 0
    scale_override: int | None = None
    eligible_at: datetime | None = None  # dependencies complete (and approved, if needed)
    ramp_started_at: datetime | None = None
    submitted_at: datetime | None = None
    finished_at: datetime | None = None
    completed_indexes: str = ""
    failed_indexes: str = ""
    active: int = 0  # pods running or pending, as last observed
    alerted_indexes: str = ""
    approval_alerted: bool = False
    progress_count: int = 0
    progress_at: datetime | None = None
    stall_alerted: bool = False
    failure_reason: str = ""
    delete_requested: bool = False  # operator `pipeline delete`: remove the Job and its pods
    # A re-submitted layer's earlier Job: this attempt starts only once none of its pods still
    # runs (deleted first when the operator asked), so two attempts never overlap.
    retire_job: str = ""
    retire_delete: bool = False
    # Pod accounting (see shared.reconcile.pod_accounting): requests of this layer's pods, usage of
    # the pods recorded as finished, the running pods' usage so far, and what has been recorded.
    cpu_request: float = 0.0
    memory_request_gib: float = 0.0
    cpu_seconds: float = 0.0  # vCPU-seconds of finished pods
    memory_gib_seconds: float = 0.0
    running_cpu_seconds: float = 0.0  # accrued by pods still running at the last reconcile
    running_memory_gib_seconds: float = 0.0
    pods_succeeded: int = 0
    pods_failed: int = 0
    pods_preempted: int = 0
    succeeded_runtime_s: float = 0.0
    open_pods: list[str] = field(default_factory=list)  # uids seen unfinished last time
    pods_watermark: datetime | None = None  # pods created after it are new to us
    pods_at_watermark: list[str] = field(default_factory=list)
    pods_listed_at: datetime | None = None  # the last listing: when open pods were last seen
    # Out-of-memory kills (container reason OOMKilled) of this attempt's pods; alerted once.
    oom_killed: int = 0
    oom_alerted: bool = False
    # The memory of this attempt's pods over the config's (job.oom_memory_factor, compounded
    # per attempt that saw OOM kills).
    memory_factor: float = 1.0
    # Node-pressure evictions of this attempt's pods per index, packed "index:count,..."
    # (shared.reconcile.evictions), and the indexes alerted for reaching
    # job.max_evictions_per_index.
    evictions: str = ""
    eviction_alerted_indexes: str = ""
    # `pipeline start --from-layer`: built by an earlier run (its done markers were checked).
    done_before: bool = False
    # Ready to start but held back by controller.max_vcpus at the last reconcile.
    held_by_vcpu_cap: bool = False
    # Hung pods (shared.reconcile.hung_pods): how many were deleted, their uids (each is handled
    # once) and the per-chunk times of the latest succeeded pods (the hung threshold's p95).
    pods_hung: int = 0
    hung_pod_uids: list[str] = field(default_factory=list)
    chunk_s_samples: list[float] = field(default_factory=list)
    # Chunks found marked done in the ledger when the layer's Job completed (None: not
    # checked; shared.reconcile.completeness, docs/verify.md).
    chunks_marked: int | None = None
    # When a busy Bigtable last stepped this layer's parallelism down
    # (shared.reconcile.bigtable_load: at most one step per ramp period).
    ramp_lowered_at: datetime | None = None
    # What its succeeded pods used (the latest 200: mean vCPU, peak GiB;
    # shared.reconcile.rightsize).
    used_cpu: list[float] = field(default_factory=list)
    used_memory_gib: list[float] = field(default_factory=list)
    # Its canary (controller.canary_chunks; shared.reconcile.canary): "" (none), running, done or
    # failed; its Job; and its record (figures, sized requests, the build's forecast).
    canary_phase: str = ""
    canary_job: str = ""
    canary: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return layer_key(self.stage, self.layer)

    def to_doc(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> LayerState:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in known})


@dataclass
class SetupState:
    """A stage's setup pass (`shared.jobs.setup_job`): one pod that must succeed before the
    stage's first layer may start. Re-submitting a failed one bumps `attempt` (a new Job)."""

    stage: str
    phase: str = "waiting"
    attempt: int = 0
    job_name: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    failure_reason: str = ""
    earlier_s: float = 0.0  # the Job spans of its earlier attempts (priced with this one)

    @property
    def layer(self) -> int:
        """The setup Job's layer label (0: before layer 2), as the ownership checks read it."""
        return SETUP_LAYER

    def span_s(self, now: datetime) -> float:
        """Seconds its Jobs have existed: earlier attempts plus this one (to now if running)."""
        if self.started_at is None:
            return self.earlier_s
        return self.earlier_s + max(
            0.0, ((self.finished_at or now) - self.started_at).total_seconds()
        )

    def to_doc(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> SetupState:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in known})


@dataclass
class RunState:
    """A build: its stages and layers, advance mode and status."""

    run_id: str
    graph_id: str
    stages: list[str]
    top_layers: dict[str, int]  # stage -> its last layer
    advance: str = "approve"
    status: str = "running"
    created_at: datetime | None = None
    finished_at: datetime | None = None
    budget_usd: float | None = None
    budget_alerted: bool = False
    finish_alerted: bool = False
    version: int = 0
    config: dict[str, Any] = field(default_factory=dict)  # pipeline.yml snapshot (current)
    config_version: int = 1  # bumped by `pipeline apply` (history: runs/{run}/config_versions)
    # `pipeline start --force` past another active run of the graph: who, when, why, which.
    forced_start: dict[str, Any] = field(default_factory=dict)
    # `pipeline start --from-layer` / `start_layers`: stage -> {layer, by, at, verified}; a
    # stage whose pods write no done markers starts unverified (shared/operate/start_from.py).
    mid_graph_starts: dict[str, dict[str, Any]] = field(default_factory=dict)
    dataset: dict[str, Any] = field(default_factory=dict)  # dataset snapshot
    layers: dict[str, LayerState] = field(default_factory=dict)
    # Each stage's setup pass (stages without one are absent; runs from before setups too).
    setups: dict[str, SetupState] = field(default_factory=dict)
    # Why the ramp holds or steps down at the last reconcile (the graph's Bigtable is busy;
    # shared.reconcile.bigtable_load), "" while it runs freely. Not the load itself: a number that
    # moves on every read would make every reconcile a write.
    ramp_hold: str = ""
    # What the controller used for this run (shared.money.controller_usage), priced by the bill.
    controller_usage: dict[str, Any] = field(default_factory=dict)

    def setup_pending(self, stage: str) -> bool:
        """True while the stage's setup pass has not succeeded (False: none, or done)."""
        setup = self.setups.get(stage)
        return setup is not None and setup.phase != "succeeded"

    def stage_may_begin(self, stage: str) -> bool:
        """Every stage `stage` depends on is complete: its setup may run."""
        return all(self.stage_complete(dep) for dep in dependencies_in(stage, self.stages))

    def ordered_layers(self) -> list[LayerState]:
        """Layers in build order: stages as listed, lowest layer first."""
        order = {s: i for i, s in enumerate(self.stages)}
        return sorted(self.layers.values(), key=lambda ls: (order.get(ls.stage, 99), ls.layer))

    def layer_below(self, ls: LayerState) -> LayerState | None:
        """The layer under `ls` in its stage (None for a stage's first layer)."""
        return self.layers.get(layer_key(ls.stage, ls.layer - 1))

    def top_layer(self, stage: str) -> LayerState:
        """The stage's last layer (the one whose completion completes the stage)."""
        return self.layers[layer_key(stage, self.top_layers[stage])]

    def stage_complete(self, stage: str) -> bool:
        mine = [ls for ls in self.layers.values() if ls.stage == stage]
        return bool(mine) and all(ls.phase == "succeeded" for ls in mine)

    def dependencies_met(self, ls: LayerState) -> bool:
        """A layer may start when the layer below is complete (or, for the first layer of a
        stage, when every stage it depends on is complete)."""
        below = self.layer_below(ls)
        if below is not None:
            return below.phase == "succeeded"
        return not self.setup_pending(ls.stage) and self.stage_may_begin(ls.stage)

    def ready_since(self, ls: LayerState) -> datetime | None:
        """When the layer's dependencies were met: the layer below finished or, for a
        stage's first layer, the last of the stages it depends on (or, with none, the run was
        created). None while something it waits for has not finished."""
        below = self.layer_below(ls)
        if below is not None:
            return below.finished_at
        setup = self.setups.get(ls.stage)
        if setup is not None:  # it ran once the stages it waits for were done
            return setup.finished_at if setup.phase == "succeeded" else None
        deps = dependencies_in(ls.stage, self.stages)
        if not deps:
            return self.created_at
        stamps = [self.top_layer(d).finished_at for d in deps]
        return None if None in stamps else max(stamps)  # type: ignore[type-var]

    def run_doc(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.pop("layers")
        return doc

    @classmethod
    def from_docs(cls, run: dict[str, Any], layers: list[dict[str, Any]]) -> RunState:
        known = {f.name for f in fields(cls)} - {"layers", "setups"}
        state = cls(**{k: v for k, v in run.items() if k in known})
        setups = run.get("setups") or {}
        state.setups = {k: SetupState.from_doc(v) for k, v in setups.items()}
        state.layers = {ls.key: ls for ls in (LayerState.from_doc(d) for d in layers)}
        return state


def build_layers(stages: list[str], top_layers: dict[str, int]) -> dict[str, LayerState]:
    """All layers of a run, every one waiting."""
    out: dict[str, LayerState] = {}
    for stage in stages:
        for layer in range(FIRST_LAYER, top_layers[stage] + 1):
            ls = LayerState(stage=stage, layer=layer)
            out[ls.key] = ls
    return out
