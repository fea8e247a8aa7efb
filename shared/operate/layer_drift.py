"""`pipeline apply`'s drift of a running layer: how the new config differs from the one its Job
was created from, and what that does to the Job. Pure: no I/O.

A Job's pod template is immutable, so a running layer keeps computing with the config it was
created from. Drift that makes the work it does wrong (its image, `perm_seed`, `batch_size` or
an `env:` value: what each pod builds, and how) replaces the Job at once: it is deleted and a
new attempt is created, whose workers skip the chunks already done, as a re-submit's do. This
is how a lab fixes a bad image mid-run. Drift that only changes how pods are scheduled or
retried (processes, compute class, Spot, retries, parallelism) applies as before (the ramp at
once, the rest on the layer's next attempt), with a note: replacing the Job for it would throw
away the indexes it finished, which for a stage without done markers is the whole layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from shared.config.config import PipelineConfig

# Per stage: the settings a running Job's pods build with (their change replaces the Job).
WORK_FIELDS = ("image", "perm_seed", "batch_size")
# Per stage: the settings that only schedule or retry the pods (noted, applied as before).
SCHEDULING_FIELDS = (
    "parallel",
    "processes_per_vcpu",
    "compute_class",
    "spot",
    "task_retries",
    "max_failed_tasks",
    "ramp",
)
ENV_PREFIX = "env:"


class DriftAction(Enum):
    """What `pipeline apply` does to a running layer's Job."""

    NONE = "none"  # nothing its Job was created from changed
    REPLACE = "replace"  # deleted and created again at once (done chunks are skipped)
    NOTE = "note"  # scheduling only: applied as before, with a note


@dataclass(frozen=True)
class FieldDrift:
    """One setting of a layer that differs: `image`, `perm_seed`, `env:NAME`, `ramp`, ..."""

    field: str
    running: Any  # what the running Job was created from (None: not set)
    desired: Any  # what the new config says (None: removed)

    def describe(self) -> str:
        return f"{self.field} {self.running!r} -> {self.desired!r}"


@dataclass(frozen=True)
class LayerDrift:
    """A running layer's drift: the fields that make its Job's work wrong and those that only
    schedule it."""

    key: str  # ingest-L3
    work: tuple[FieldDrift, ...] = ()
    scheduling: tuple[FieldDrift, ...] = ()

    @property
    def action(self) -> DriftAction:
        if self.work:
            return DriftAction.REPLACE
        return DriftAction.NOTE if self.scheduling else DriftAction.NONE

    def to_doc(self) -> dict[str, Any]:
        """As a config version records it."""
        return {
            "layer": self.key,
            "action": self.action.value,
            "work": [f.describe() for f in self.work],
            "scheduling": [f.describe() for f in self.scheduling],
        }


def _stage_values(cfg: PipelineConfig, stage: str) -> dict[str, Any]:
    job = cfg.job.for_stage(stage)
    values: dict[str, Any] = {"image": cfg.images.get(stage)}
    for name in (*WORK_FIELDS[1:], *SCHEDULING_FIELDS):
        value = getattr(job, name)
        values[name] = value.model_dump() if hasattr(value, "model_dump") else value
    for name, value in cfg.env.items():
        values[ENV_PREFIX + name] = value
    return values


def layer_drift(
    running: PipelineConfig, desired: PipelineConfig, key: str, stage: str
) -> LayerDrift:
    """How `desired` differs from `running` (the config the layer's Job was created from) for
    a layer of `stage`, split into work and scheduling drift (`env:` keys added, changed or
    removed are work drift)."""
    old, new = _stage_values(running, stage), _stage_values(desired, stage)
    work, scheduling = [], []
    for name in sorted(old.keys() | new.keys(), key=_field_order):
        if old.get(name) == new.get(name):
            continue
        drift = FieldDrift(name, old.get(name), new.get(name))
        (scheduling if name in SCHEDULING_FIELDS else work).append(drift)
    return LayerDrift(key, tuple(work), tuple(scheduling))


def _field_order(name: str) -> tuple[int, str]:
    order = (*WORK_FIELDS, *SCHEDULING_FIELDS)
    return (order.index(name), "") if name in order else (len(order), name)


def describe(drift: LayerDrift, job_name: str) -> str:
    """What `pipeline apply` does to the running layer, one line."""
    if drift.action is DriftAction.REPLACE:
        fields = "; ".join(f.describe() for f in drift.work)
        extra = (
            f" (with {'; '.join(f.describe() for f in drift.scheduling)})"
            if drift.scheduling
            else ""
        )
        return (
            f"{drift.key} (running, job {job_name}): replaced at once: {fields}{extra}; its Job "
            "is deleted and a new attempt created, whose workers skip the chunks already done "
            "(a stage without done markers builds the layer again)"
        )
    if drift.action is DriftAction.NOTE:
        fields = "; ".join(f.describe() for f in drift.scheduling)
        return (
            f"{drift.key} (running, job {job_name}): scheduling only, not replaced: {fields}; "
            "the ramp applies at once, the rest on the layer's next attempt"
        )
    return f"{drift.key} (running, job {job_name}): its Job is unchanged"
