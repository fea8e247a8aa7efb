"""`pipeline apply`: a new version of a running build's config, as a diff of dotted keys,
what each change does to the run and when, and the refusals. Pure module.

The controller decides every reconcile from the config stored on the run (`run.config`,
`run.dataset`), so replacing it is most of applying it: the ramp and the controller
settings act on the next reconcile; everything a pod template holds (resources, images,
env, commands, retries) goes into the Jobs created from then on, which for a layer already
running means its next attempt (a Job's pod template is immutable); the requests also reach
its running pods in place where the cluster resizes pods (shared.reconcile.resize). Drift in
what its pods build (image, `perm_seed`, `batch_size`, `env:`) replaces its Job at once
(shared.operate.layer_drift; the replacement is a new attempt the same commit records, carried
out by the controller's decide/act path as a re-submit's is). Keys that decide which
chunks each pod builds, or what a chunk is, would make finished work disagree with the rest
of the graph: they are refused unless forced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.config.config import PipelineConfig
from shared.config.config_files import config_from_dict
from shared.model.phase import Phase, RunStatus
from shared.model.state import RunState
from shared.operate.dataset_changes import check_apply as check_dataset_changes
from shared.operate.layer_drift import DriftAction, LayerDrift, describe, layer_drift
from shared.operate.mesh_settings import check_mesh_changes
from shared.operate.operator_actions import ActionError, replace_running

MAX_CHANGES = 200  # recorded per version (a version diff is a review aid, not a backup)
MAX_VALUE_CHARS = 300  # of one recorded old/new value

# Never part of a diff: where the file was, how it was read.
_IGNORED = (
    "config.source_path",
    "config.compat_notes",
    "config.load_notes",
    "config.dataset_fingerprint",  # the file's bytes: its meaning is the dataset.* keys
)
# Changes that invalidate finished work (the batches' chunks, the chunk grid, the graph).
_PROTECTED = (
    r"config\.graph_id",
    r"config\.bigtable\..*",
    r"config\.job\.(workloads\.[^.]+\.)?(perm_seed|batch_size)",
    r"dataset\.(data_source|graph_config)\..*",
)
# Changes the next reconcile acts on.
_AT_ONCE = (
    r"config\.job\.(workloads\.[^.]+\.)?ramp\..*",
    r"config\.controller\..*",
)
_NO_EFFECT = (r"config\.start_layers\..*", r"config\.dataset")
# The requests: given to running pods in place where the cluster resizes pods
# (shared.reconcile.resize), else as any other pod-template change.
_IN_PLACE = (r"config\.job\.(workloads\.[^.]+\.)?resources\..*",)
# Read once by the meshing setup into the graph (shared.operate.mesh_settings).
_MESH_SETUP = (r"dataset\.mesh_config(\..+)?",)
# What a running Job's pods build with: the Job is replaced at once (shared.operate.layer_drift;
# perm_seed and batch_size too, once forced).
_REPLACING = (r"config\.images\..+", r"config\.env\..+")
AT_ONCE = "at once (next reconcile)"
NEXT_ATTEMPT = "new Jobs; running layers on their next attempt (`pipeline submit` after a failure)"
NO_EFFECT = "no effect on a started run"
REFUSED = "invalidates finished work"
IN_PLACE = (
    "running pods resized in place where the cluster can (Kubernetes 1.33+), else on their "
    "layer's next attempt; new Jobs"
)
AT_MESH_SETUP = "when the meshing setup runs (it writes them into the graph); refused after it ran"
REPLACES_RUNNING = "new Jobs; a running layer's Job is replaced at once (done chunks are skipped)"


class ProtectedChangeError(ActionError):
    """The new config changes what finished work was built with."""


@dataclass(frozen=True)
class Change:
    key: str  # dotted: config.job.ramp.max, dataset.data_source.size
    old: Any
    new: Any
    when: str  # AT_ONCE, IN_PLACE, NEXT_ATTEMPT, NO_EFFECT or REFUSED

    def to_doc(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "old": _short(self.old),
            "new": _short(self.new),
            "when": self.when,
        }


def flatten(value: Any, prefix: str) -> dict[str, Any]:
    """A nested mapping as dotted keys -> leaf values (lists are leaves; an empty mapping
    has none, so a key added to it is one change)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(flatten(sub, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def snapshot(cfg: PipelineConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and dataset as a run stores them."""
    return cfg.model_dump(mode="json", exclude={"dataset_config"}), cfg.ds.model_dump(mode="json")


def diff(old: PipelineConfig, new: PipelineConfig) -> list[Change]:
    """Every changed leaf, as dotted keys, with what it does to a running build."""
    (oc, od), (nc, nd) = snapshot(old), snapshot(new)
    before = {**flatten(oc, "config"), **flatten(od, "dataset")}
    after = {**flatten(nc, "config"), **flatten(nd, "dataset")}
    changes = []
    for key in sorted(before.keys() | after.keys()):
        if key in _IGNORED or before.get(key) == after.get(key):
            continue
        changes.append(Change(key, before.get(key), after.get(key), _when(key)))
    return changes


def _when(key: str) -> str:
    for patterns, when in (
        (_PROTECTED, REFUSED),
        (_MESH_SETUP, AT_MESH_SETUP),
        (_REPLACING, REPLACES_RUNNING),
        (_AT_ONCE, AT_ONCE),
        (_NO_EFFECT, NO_EFFECT),
        (_IN_PLACE, IN_PLACE),
    ):
        if any(re.fullmatch(p, key) for p in patterns):
            return when
    return NEXT_ATTEMPT


def apply_config(
    run: RunState, new: PipelineConfig, changes: list[Change], force: bool, by: str, now: datetime
) -> dict[str, Any]:
    """Store `new` as the run's config (version + 1) and return the history entry: who,
    when, the diff, whether forced. ProtectedChangeError lists the protected changes unless
    `force`; MeshSettingsInGraphError for a `mesh_config` change after the meshing setup ran
    (forced or not); DatasetChangedError for dataset keys changed since the run started
    that cannot take effect (shared.operate.dataset_changes; forced or not); ActionError for a
    run that has finished or a config of another graph."""
    if run.status == RunStatus.SUCCEEDED:
        raise ActionError(f"run {run.run_id} has succeeded: there is nothing left to apply to")
    # Not forceable: forced, the change would still not reach the workers.
    check_mesh_changes(run, new, changes)
    check_dataset_changes(run, new, changes)
    refused = [c for c in changes if c.when == REFUSED]
    if refused and not force:
        keys = ", ".join(f"{c.key} {c.old!r} -> {c.new!r}" for c in refused)
        raise ProtectedChangeError(
            f"refused: {keys} would invalidate finished work (done chunks were built with "
            "the old value); revert it, or apply with --force if the finished work is to be "
            "redone or does not depend on it"
        )
    drifts = running_drift(run, new)
    run.config, run.dataset = snapshot(new)
    run.config_version += 1
    for drift in drifts:
        if drift.action is DriftAction.REPLACE:
            ls = run.layers[drift.key]
            replace_running(run, ls.stage, ls.layer, by, now)
    return {
        "version": run.config_version,
        "by": by,
        "at": now,
        "forced": bool(refused),
        "changes": [c.to_doc() for c in changes[:MAX_CHANGES]],
        "changes_omitted": max(0, len(changes) - MAX_CHANGES),
        # What the version does to each running layer's Job (shared.operate.layer_drift).
        "running_layers": [
            {**d.to_doc(), "job": job, "line": describe(d, job)} for d, job in _named(run, drifts)
        ],
    }


def running_drift(run: RunState, new: PipelineConfig) -> list[LayerDrift]:
    """The drift of each running layer of `run` (in build order) between the config stored
    on the run, which its Job was created from, and `new`."""
    old = config_from_dict(run.config, run.dataset)
    return [
        layer_drift(old, new, ls.key, ls.stage)
        for ls in run.ordered_layers()
        if ls.phase == Phase.RUNNING
    ]


def _named(run: RunState, drifts: list[LayerDrift]) -> list[tuple[LayerDrift, str]]:
    # After a replacement the layer's Job is the one being retired.
    return [(d, run.layers[d.key].job.name or run.layers[d.key].job.retire_job) for d in drifts]


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."
