"""Run and layer state as stored in Firestore: dataclasses and the layer gating. Pure module.

A run is a set of stages (`shared.model.stages`), each a sequence of layers. Each layer is one
Indexed Job. The run document carries a `version` that every state transition bumps under a
precondition, so two reconciles of one run can never both apply a transition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from shared.model.phase import (
    Phase,
    RunStatus,
    canary_phase_from_doc,
    canary_phase_to_doc,
    phase_from_doc,
    run_status_from_doc,
)
from shared.model.stages import FIRST_LAYER, dependencies_in

SETUP_LAYER = 0  # a setup Job's layer (label, CreateJob, `pipeline submit RUN STAGE 0`)
# The controller no longer acts (a re-submit revives).
RUN_ENDED = (RunStatus.SUCCEEDED, RunStatus.FAILED)


class JobKind(StrEnum):
    """Which of a run's Jobs a name is (`RunState.job_names`)."""

    SETUP = "setup"  # a stage's setup pass (SetupState.job_name)
    LAYER = "layer"  # a layer's current attempt (LayerState.job.name)
    CANARY = "canary"  # a layer's canary (LayerState.canary.job)


def layer_key(stage: str, layer: int) -> str:
    """Document id of a layer: `ingest-L3`."""
    return f"{stage}-L{layer}"


@dataclass(slots=True)
class Approval:
    """The operator's go-ahead for a layer under `advance: approve`, and its reminder."""

    granted: bool = False
    by: str = ""
    at: datetime | None = None
    alerted: bool = False  # the approval-pending alert was sent


@dataclass(slots=True)
class JobAttempt:
    """The layer's current Indexed Job: which attempt, its name and size, and the earlier Job
    a re-submit retires."""

    attempt: int = 0  # bumped by each operator re-submit; part of the Job name
    name: str = ""
    completions: int = 0
    parallelism: int = 0
    scale_override: int | None = None
    delete_requested: bool = False  # operator `pipeline delete`: remove the Job and its pods
    # A re-submitted layer's earlier Job: this attempt starts only once none of its pods still
    # runs (deleted first when the operator asked), so two attempts never overlap.
    retire_job: str = ""
    retire_delete: bool = False
    # `pipeline apply`'s new requests given to this attempt's running pods in place
    # (shared.reconcile.resize): the target (0: none) and the pods asked for it, each once.
    resize_cpu: float = 0.0
    resize_memory_gib: float = 0.0
    resize_asked: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Timing:
    """When the layer became eligible, was held, ramped, was submitted and finished."""

    eligible_at: datetime | None = None  # dependencies complete (and approved, if needed)
    # Ready to start but held back by controller.max_vcpus at the last reconcile.
    held_by_vcpu_cap: bool = False
    ramp_started_at: datetime | None = None
    # When a busy Bigtable last stepped this layer's parallelism down
    # (shared.reconcile.bigtable_load: at most one step per ramp period).
    ramp_lowered_at: datetime | None = None
    submitted_at: datetime | None = None
    finished_at: datetime | None = None
    # The first of its pods to finish: its process's start -> its first chunk begun
    # (interpreter, imports, clients, metadata), from the worker's summary line; None: not
    # read (no pod finished yet, or an image whose harness reports no timings).
    process_start_s: float | None = None


@dataclass(slots=True)
class Progress:
    """How far the Job's indexes have got: the index sets, the progress mark the stall alert
    watches, and the ledger check at completion."""

    completed_indexes: str = ""
    failed_indexes: str = ""
    active: int = 0  # pods running or pending, as last observed
    alerted_indexes: str = ""
    count: int = 0  # completed indexes at the last progress mark
    at: datetime | None = None  # when the count last moved
    stall_alerted: bool = False
    # Chunks found marked done in the ledger when the layer's Job completed (None: not
    # checked; shared.reconcile.completeness, docs/verify.md).
    chunks_marked: int | None = None


@dataclass(slots=True)
class PodUsage:
    """Pod accounting (shared.reconcile.pod_accounting): requests of this layer's pods, usage of
    the pods recorded as finished, the running pods' usage so far, what has been recorded, and
    what succeeded pods used (rightsizing, the hung threshold)."""

    cpu_request: float = 0.0
    memory_request_gib: float = 0.0
    cpu_seconds: float = 0.0  # vCPU-seconds of finished pods
    memory_gib_seconds: float = 0.0
    running_cpu_seconds: float = 0.0  # accrued by pods still running at the last reconcile
    running_memory_gib_seconds: float = 0.0
    succeeded: int = 0
    failed: int = 0
    preempted: int = 0
    succeeded_runtime_s: float = 0.0
    open: list[str] = field(default_factory=list)  # uids seen unfinished last time
    watermark: datetime | None = None  # pods created after it are new to us
    at_watermark: list[str] = field(default_factory=list)
    listed_at: datetime | None = None  # the last listing: when open pods were last seen
    # What its succeeded pods used (the latest 200: mean vCPU, peak GiB;
    # shared.reconcile.rightsize).
    used_cpu: list[float] = field(default_factory=list)
    used_memory_gib: list[float] = field(default_factory=list)
    # The per-chunk times of the latest succeeded pods (the hung threshold's p95).
    chunk_s_samples: list[float] = field(default_factory=list)


@dataclass(slots=True)
class Faults:
    """What went wrong with this attempt's pods and what the controller did about it."""

    # Out-of-memory kills (container reason OOMKilled) of this attempt's pods; alerted once.
    oom_killed: int = 0
    # Of those, the ones the node's OOM killer ended (its OOMKilling event; the container's
    # limit did not), shared.reconcile.node_oom.
    node_oom_killed: int = 0
    oom_alerted: bool = False
    # The memory of this attempt's pods over the config's (job.oom_memory_factor, compounded
    # per attempt that saw OOM kills).
    memory_factor: float = 1.0
    # Node-pressure evictions of this attempt's pods per index, packed "index:count,..."
    # (shared.reconcile.evictions), and the indexes alerted for reaching
    # job.max_evictions_per_index.
    evictions: str = ""
    eviction_alerted_indexes: str = ""
    # Hung pods (shared.reconcile.hung_pods): how many were deleted and their uids (each is
    # handled once).
    hung: int = 0
    hung_pod_uids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Canary:
    """The layer's canary (controller.canary_chunks; shared.reconcile.canary)."""

    # Waiting (none yet), running, succeeded or failed; stored as "", running, done or failed
    # (shared.model.phase.canary_phase_to_doc).
    phase: Phase = Phase.WAITING
    job: str = ""
    record: dict[str, Any] = field(default_factory=dict)  # figures, sized requests, forecast


# The stored layer document is flat (one key per field, the names below, in this order): the
# records are how the code reads it, not how Firestore holds it. Flat key -> (record, field);
# record None: a field of LayerState itself.
_FLAT_KEYS: tuple[tuple[str, str | None, str], ...] = (
    ("stage", None, "stage"),
    ("layer", None, "layer"),
    ("phase", None, "phase"),
    ("approved", "approval", "granted"),
    ("approved_by", "approval", "by"),
    ("approved_at", "approval", "at"),
    ("attempt", "job", "attempt"),
    ("job_name", "job", "name"),
    ("completions", "job", "completions"),
    ("parallelism", "job", "parallelism"),
    ("scale_override", "job", "scale_override"),
    ("eligible_at", "timing", "eligible_at"),
    ("ramp_started_at", "timing", "ramp_started_at"),
    ("submitted_at", "timing", "submitted_at"),
    ("finished_at", "timing", "finished_at"),
    ("completed_indexes", "progress", "completed_indexes"),
    ("failed_indexes", "progress", "failed_indexes"),
    ("active", "progress", "active"),
    ("alerted_indexes", "progress", "alerted_indexes"),
    ("approval_alerted", "approval", "alerted"),
    ("progress_count", "progress", "count"),
    ("progress_at", "progress", "at"),
    ("stall_alerted", "progress", "stall_alerted"),
    ("failure_reason", None, "failure_reason"),
    ("delete_requested", "job", "delete_requested"),
    ("retire_job", "job", "retire_job"),
    ("retire_delete", "job", "retire_delete"),
    ("cpu_request", "pods", "cpu_request"),
    ("memory_request_gib", "pods", "memory_request_gib"),
    ("cpu_seconds", "pods", "cpu_seconds"),
    ("memory_gib_seconds", "pods", "memory_gib_seconds"),
    ("running_cpu_seconds", "pods", "running_cpu_seconds"),
    ("running_memory_gib_seconds", "pods", "running_memory_gib_seconds"),
    ("pods_succeeded", "pods", "succeeded"),
    ("pods_failed", "pods", "failed"),
    ("pods_preempted", "pods", "preempted"),
    ("succeeded_runtime_s", "pods", "succeeded_runtime_s"),
    ("open_pods", "pods", "open"),
    ("pods_watermark", "pods", "watermark"),
    ("pods_at_watermark", "pods", "at_watermark"),
    ("pods_listed_at", "pods", "listed_at"),
    ("oom_killed", "faults", "oom_killed"),
    ("node_oom_killed", "faults", "node_oom_killed"),
    ("oom_alerted", "faults", "oom_alerted"),
    ("memory_factor", "faults", "memory_factor"),
    ("evictions", "faults", "evictions"),
    ("eviction_alerted_indexes", "faults", "eviction_alerted_indexes"),
    ("done_before", None, "done_before"),
    ("root_check_failed", None, "root_check_failed"),
    ("held_by_vcpu_cap", "timing", "held_by_vcpu_cap"),
    ("pods_hung", "faults", "hung"),
    ("hung_pod_uids", "faults", "hung_pod_uids"),
    ("chunk_s_samples", "pods", "chunk_s_samples"),
    ("chunks_marked", "progress", "chunks_marked"),
    ("ramp_lowered_at", "timing", "ramp_lowered_at"),
    ("used_cpu", "pods", "used_cpu"),
    ("used_memory_gib", "pods", "used_memory_gib"),
    ("canary_phase", "canary", "phase"),
    ("canary_job", "canary", "job"),
    ("canary", "canary", "record"),
    ("resize_cpu", "job", "resize_cpu"),
    ("resize_memory_gib", "job", "resize_memory_gib"),
    ("resize_asked", "job", "resize_asked"),
    ("process_start_s", "timing", "process_start_s"),
)


@dataclass(slots=True)
class LayerState:
    """One layer of one stage: its state machine, approval, Job and progress.

    Identity (stage, layer) and the state machine (phase, why it failed, and whether an earlier
    run built it) are fields of their own; the rest is grouped by what it is about:
    `approval` (the operator's go-ahead), `job` (the current Indexed Job attempt and the one it
    retires), `timing` (eligible, held, ramped, submitted, finished), `progress` (the Job's
    indexes and the stall watch), `pods` (pod accounting: requests, usage, what succeeded pods
    used), `faults` (OOM kills, evictions, hung pods) and `canary`.

    The stored document stays flat (`to_doc`/`from_doc` and `_FLAT_KEYS`): the records are a
    shape in code only, so documents written before them load unchanged.
    """

    stage: str
    layer: int
    phase: Phase = Phase.WAITING
    failure_reason: str = ""
    # `pipeline start --from-layer`: built by an earlier run (its done markers were checked).
    done_before: bool = False
    # The root layer of an image's ingest failed PyChunkedGraph's check after its chunk was
    # marked done (shared.reconcile.root_check): failed, though its markers are complete.
    root_check_failed: bool = False
    approval: Approval = field(default_factory=Approval)
    job: JobAttempt = field(default_factory=JobAttempt)
    timing: Timing = field(default_factory=Timing)
    progress: Progress = field(default_factory=Progress)
    pods: PodUsage = field(default_factory=PodUsage)
    faults: Faults = field(default_factory=Faults)
    canary: Canary = field(default_factory=Canary)

    @property
    def key(self) -> str:
        return layer_key(self.stage, self.layer)

    def to_doc(self) -> dict[str, Any]:
        """The flat stored document (the keys of `_FLAT_KEYS`, in that order)."""
        nested = asdict(self)
        doc = {
            flat: nested[name] if record is None else nested[record][name]
            for flat, record, name in _FLAT_KEYS
        }
        # Plain strings in the document; the canary's under its stored names.
        doc["phase"] = Phase(self.phase).value
        doc["canary_phase"] = canary_phase_to_doc(self.canary.phase)
        return doc

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> LayerState:
        """Read a flat stored document; unknown keys are ignored, missing ones take defaults."""
        top: dict[str, Any] = {}
        parts: dict[str, dict[str, Any]] = {}
        for flat, record, name in _FLAT_KEYS:
            if flat not in doc:
                continue
            if record is None:
                top[name] = doc[flat]
            else:
                parts.setdefault(record, {})[name] = doc[flat]
        where = f"layer {layer_key(doc.get('stage', '?'), doc.get('layer', '?'))}"
        if "phase" in top:
            top["phase"] = phase_from_doc(top["phase"], where)
        if "phase" in parts.get("canary", {}):
            parts["canary"]["phase"] = canary_phase_from_doc(parts["canary"]["phase"], where)
        return cls(**top, **{r: _RECORDS[r](**kw) for r, kw in parts.items()})


_RECORDS: dict[str, type] = {
    "approval": Approval,
    "job": JobAttempt,
    "timing": Timing,
    "progress": Progress,
    "pods": PodUsage,
    "faults": Faults,
    "canary": Canary,
}


@dataclass
class SetupState:
    """A stage's setup pass (`shared.jobs.setup_job`): one pod that must succeed before the
    stage's first layer may start. Re-submitting a failed one bumps `attempt` (a new Job)."""

    stage: str
    phase: Phase = Phase.WAITING
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
        """The stored document (the phase as a plain string)."""
        return {**asdict(self), "phase": Phase(self.phase).value}

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> SetupState:
        """Read a stored setup; unknown keys are ignored, missing ones take defaults."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in doc.items() if k in known}
        if "phase" in kw:
            kw["phase"] = phase_from_doc(kw["phase"], f"setup {doc.get('stage', '?')}")
        return cls(**kw)


@dataclass
class RunState:
    """A build: its stages and layers, advance mode and status."""

    run_id: str
    graph_id: str
    stages: list[str]
    top_layers: dict[str, int]  # stage -> its last layer
    advance: str = "approve"
    status: RunStatus = RunStatus.RUNNING
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
        return setup is not None and setup.phase != Phase.SUCCEEDED

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
        return bool(mine) and all(ls.phase == Phase.SUCCEEDED for ls in mine)

    def dependencies_met(self, ls: LayerState) -> bool:
        """A layer may start when the layer below is complete (or, for the first layer of a
        stage, when every stage it depends on is complete)."""
        below = self.layer_below(ls)
        if below is not None:
            return below.phase == Phase.SUCCEEDED
        return not self.setup_pending(ls.stage) and self.stage_may_begin(ls.stage)

    def ready_since(self, ls: LayerState) -> datetime | None:
        """When the layer's dependencies were met: the layer below finished or, for a
        stage's first layer, the last of the stages it depends on (or, with none, the run was
        created). None while something it waits for has not finished."""
        below = self.layer_below(ls)
        if below is not None:
            return below.timing.finished_at
        setup = self.setups.get(ls.stage)
        if setup is not None:  # it ran once the stages it waits for were done
            return setup.finished_at if setup.phase == Phase.SUCCEEDED else None
        deps = dependencies_in(ls.stage, self.stages)
        if not deps:
            return self.created_at
        stamps = [self.top_layer(d).timing.finished_at for d in deps]
        return None if None in stamps else max(stamps)  # type: ignore[type-var]

    def job_names(self, *kinds: JobKind) -> list[str]:
        """Every Job name the run owns (of `kinds`; all kinds if none given): each setup's, then
        each layer's current attempt and its canary, in the order of `setups` and `layers`;
        unnamed (not yet planned) ones are left out. A re-submit's retired attempt is not listed
        (it had the name before)."""
        want = set(kinds or JobKind)
        out = [s.job_name for s in self.setups.values() if JobKind.SETUP in want]
        for ls in self.layers.values():
            out += [ls.job.name] if JobKind.LAYER in want else []
            out += [ls.canary.job] if JobKind.CANARY in want else []
        return [name for name in out if name]

    def run_doc(self) -> dict[str, Any]:
        """The stored run document (its layers are documents of their own)."""
        # Without its layers and setups: asdict would convert every layer only to drop it, the
        # bulk of a reconcile's comparison of the state before and after.
        doc = asdict(replace(self, layers={}, setups={}))
        doc.pop("layers")
        doc["status"] = RunStatus(self.status).value
        doc["setups"] = {k: s.to_doc() for k, s in self.setups.items()}
        return doc

    @classmethod
    def from_docs(cls, run: dict[str, Any], layers: list[dict[str, Any]]) -> RunState:
        """Read a run from its stored document and its layers' documents."""
        known = {f.name for f in fields(cls)} - {"layers", "setups"}
        kw = {k: v for k, v in run.items() if k in known}
        if "status" in kw:
            kw["status"] = run_status_from_doc(kw["status"], f"run {run.get('run_id', '?')}")
        state = cls(**kw)
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
