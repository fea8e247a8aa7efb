"""The dataset file's fingerprint: a run records it when it starts (with its config,
`config.dataset_fingerprint`), and `pipeline apply` and a re-submit refuse when the file
changed since, naming the changed keys, unless the change can take effect. Pure: no I/O.

Where a run's dataset is read decides whether a change can reach it:

- `mesh_config`: the meshing setup reads it once and writes it into the graph
  (shared.operate.mesh_settings). Before that setup has run, a change takes effect (the setup
  gets the run's dataset as stored then); after, `pipeline apply` refuses it there.
- Every other key: the setup passes of PyChunkedGraph's images read the dataset file when
  they run and write it into the graph, whose metadata the images' workers read; the file
  their pods mount is the run's ConfigMap, written when a setup starts. So in a run with a
  stage that runs an image, a change reaches nothing. Where every stage runs our worker it
  takes effect: our worker reads the run's dataset from its pod's environment
  (`PCG_DATASET_JSON`) in every Job created from then on (its setup writes only the grid,
  whose keys `pipeline apply` refuses unless forced, as invalidating finished work).

`pipeline apply` records the new file's fingerprint with the version it applies. A re-submit
builds with the run's dataset as stored, never the file: it refuses any change, naming those
that `pipeline apply` would take in first and those to revert. `--force` changes neither:
forced, the change would still not reach the pods.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.config.config import PipelineConfig
from shared.jobs.worker_pod import runs_worker_image
from shared.model.state import RunState
from shared.operate.mesh_settings import is_mesh_key, meshing_setup_ran
from shared.operate.operator_actions import ActionError

DATASET_PREFIX = "dataset."


class DatasetChangedError(ActionError):
    """The dataset file changed since the run started, in keys that cannot take effect (or,
    for a re-submit, that were not applied)."""


class _Change(Protocol):
    key: str
    old: object
    new: object


@dataclass(frozen=True)
class DatasetDrift:
    """The dataset keys changed since the run started: those that can take effect and those
    that cannot. Empty when the file is unchanged (or no fingerprint was recorded)."""

    recorded: str  # the fingerprint the run recorded ("": none)
    current: str  # the file's now
    effective: tuple[_Change, ...] = ()
    refused: tuple[_Change, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.recorded and self.current and self.recorded != self.current)


def recorded_fingerprint(run: RunState) -> str:
    """The dataset file's fingerprint as the run recorded it ("" for a run stored before
    fingerprints were: its documents load, and nothing is compared)."""
    return str((run.config or {}).get("dataset_fingerprint") or "")


def can_take_effect(run: RunState, cfg: PipelineConfig, key: str) -> bool:
    """Whether a change of dataset key `key` reaches the run's pods (see the module)."""
    if is_mesh_key(key):
        return not meshing_setup_ran(run, cfg)
    # Our worker reads the run's dataset in every pod (its setup writes only the grid, whose
    # keys are refused as invalidating finished work); an image's pods read the graph.
    return all(runs_worker_image(cfg, stage) for stage in run.stages)


def dataset_drift(run: RunState, new: PipelineConfig, changes: Sequence[_Change]) -> DatasetDrift:
    """The run's dataset drift: `changes` (the diff of the run's config and `new`, dotted
    keys) split by whether each dataset key can take effect, when the file's fingerprint
    (`new.dataset_fingerprint`) differs from the one the run recorded."""
    drift = DatasetDrift(recorded_fingerprint(run), new.dataset_fingerprint)
    if not drift.changed:
        return drift
    keys = [c for c in changes if c.key.startswith(DATASET_PREFIX)]
    effective = tuple(c for c in keys if can_take_effect(run, new, c.key))
    refused = tuple(c for c in keys if c not in effective)
    return DatasetDrift(drift.recorded, drift.current, effective, refused)


def _named(changes: Sequence[_Change]) -> str:
    return ", ".join(f"{c.key} {c.old!r} -> {c.new!r}" for c in changes)


def _since(run: RunState, drift: DatasetDrift) -> str:
    return (
        f"the dataset file changed since run {run.run_id} started (fingerprint "
        f"{drift.recorded} -> {drift.current})"
    )


def check_apply(run: RunState, new: PipelineConfig, changes: Sequence[_Change]) -> None:
    """DatasetChangedError naming the dataset keys changed since the run started that cannot
    take effect; nothing otherwise (those that can are applied with the version)."""
    drift = dataset_drift(run, new, changes)
    if not drift.refused:
        return
    raise DatasetChangedError(
        f"refused: {_since(run, drift)}: {_named(drift.refused)} cannot take effect: "
        "PyChunkedGraph's setup passes read the dataset file once and write it into the "
        "graph, whose metadata the images' workers read (mesh_config: see the meshing "
        "setup); --force does not change that. Revert these keys in the dataset file, or "
        "build with them in a new run"
    )


def check_resubmit(run: RunState, current: PipelineConfig, changes: Sequence[_Change]) -> None:
    """DatasetChangedError when the dataset file changed since the run started in any key:
    a re-submitted layer builds with the run's dataset as stored, not with the file."""
    drift = dataset_drift(run, current, changes)
    if not drift.effective and not drift.refused:
        return
    parts = []
    if drift.effective:
        parts.append(
            f"{_named(drift.effective)} can take effect: `pipeline apply {run.run_id}` "
            "takes them in, then re-submit"
        )
    if drift.refused:
        parts.append(
            f"{_named(drift.refused)} cannot take effect in this run (the images read the "
            "dataset their setup wrote into the graph): revert them"
        )
    raise DatasetChangedError(
        f"refused: {_since(run, drift)}, and a re-submitted layer builds with the run's "
        f"dataset as stored, not the file: {'; '.join(parts)}"
    )
