"""Mesh settings live in the graph: a `mesh_config` change after the meshing setup ran has no
effect, so `pipeline apply` refuses it. Pure: no I/O.

PyChunkedGraph's meshing setup (`pychunkedgraph.pipeline.meshing.setup`, the meshing stage's
setup pass) reads `mesh_config` from the mounted dataset file once and writes it into the
graph: the watershed volume's `info` (mesh dir, sharded mesh spec per layer up to
`max_layer`, the draco grid) and the graph's metadata (`custom_data["mesh"]`: `max_layer`,
`mip`, `max_error`, `dir`, `dynamic_mesh_dir`). The meshing workers read those, never the
dataset file. Once the setup has run (or is running: its pod may have read the old values),
a new `mesh_config` on the run changes nothing the workers do; the setup must be re-run to
write it (it overwrites those fields, keeping `initial_ts`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from shared.config.config import PipelineConfig
from shared.jobs.setup_job import has_setup
from shared.model.phase import Phase
from shared.model.state import RunState
from shared.operate.operator_actions import ActionError

MESHING = "meshing"
MESH_KEYS = re.compile(r"dataset\.mesh_config(\..+)?")
WRITTEN_BY_SETUP = "written into the graph by the meshing setup (before meshing's first layer)"


class MeshSettingsInGraphError(ActionError):
    """A `mesh_config` change after the meshing setup wrote the old values into the graph."""


class _Change(Protocol):
    key: str
    old: object
    new: object


def is_mesh_key(key: str) -> bool:
    """Whether a dotted diff key (`dataset.mesh_config.mip`) is one of the mesh settings."""
    return MESH_KEYS.fullmatch(key) is not None


def meshing_setup_ran(run: RunState, cfg: PipelineConfig) -> bool:
    """Whether the run's meshing setup has written (or may be writing) `mesh_config` into the
    graph: it succeeded or is running, or it was dropped because a mid-graph start found
    meshing's lower layers built (their setup ran then). False for a run without meshing or
    a meshing stage without a setup pass (our worker reads the dataset file per pod)."""
    if MESHING not in run.stages or not has_setup(cfg, MESHING):
        return False
    setup = run.setups.get(MESHING)
    if setup is None:
        return True  # skipped by `--from-layer`: it ran when the layers below were built
    return setup.phase in (Phase.RUNNING, Phase.SUCCEEDED)


def check_mesh_changes(run: RunState, cfg: PipelineConfig, changes: Sequence[_Change]) -> None:
    """MeshSettingsInGraphError naming every `mesh_config` change when the meshing setup
    already ran; nothing otherwise."""
    mesh = [c for c in changes if is_mesh_key(c.key)]
    if not mesh or not meshing_setup_ran(run, cfg):
        return
    keys = ", ".join(f"{c.key} {c.old!r} -> {c.new!r}" for c in mesh)
    raise MeshSettingsInGraphError(
        f"refused: {keys}: mesh settings live in the graph; the meshing setup of run "
        f"{run.run_id} already wrote mesh_config into it (its metadata and the watershed's "
        "mesh info), and the meshing workers read them from there, so this change would have "
        "no effect (--force does not change that). Revert it, or re-run the meshing setup with "
        "the new mesh_config first (a new run with `--stages meshing` runs it; it overwrites "
        "the mesh settings and keeps initial_ts), then build the meshes again"
    )
