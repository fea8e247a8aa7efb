"""What a stage is: its name, the stages it waits for, the layers it runs, its default command.

The one home of the build DAG's vocabulary (docs/architecture.md#one-home-per-contract): config
validation, the build plan, the run state's dependency checks, the manifest and the CLI all ask
this module. Ingest runs layer 2 to the root; meshing (present when the dataset has
`mesh_config`) from layer 2 to `mesh_config.max_layer` or the root; l2cache (present with
`l2cache_config`) is a single layer-2 pass; the migration is two passes over every layer, the
cleanup after it. Each stage has a setup pass (`shared.config.stage_selection.setup_command`) that
runs once before its first layer. Which stages and layers a config runs is
`shared.config.stage_selection`'s. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

# The command a Job runs unless `commands.<stage>` names the image's own entry point.
DEFAULT_COMMAND: tuple[str, ...] = ("python", "-m", "worker")
# A stage's setup pass (one pod before its first layer; `commands.<stage>_setup` overrides,
# an empty list turns it off). A stage run by our worker (a `workloads` plugin) runs the
# worker's setup entry, which calls the plugin module's `setup`; a stage run by a
# PyChunkedGraph image's entry point runs that image's setup (cave-pipeline 0.0.4 stages.py).
WORKER_SETUP: tuple[str, ...] = ("python", "-m", "worker.setup")
PCG_SETUP: dict[str, tuple[str, ...]] = {
    "ingest": ("python", "-m", "pychunkedgraph.pipeline.ingest.setup"),
    "meshing": ("python", "-m", "pychunkedgraph.pipeline.meshing.setup"),
    "migrate": ("python", "-m", "pychunkedgraph.pipeline.migrate.setup"),
    "migrate_cleanup": ("python", "-m", "pychunkedgraph.pipeline.migrate.setup"),
    "l2cache": ("python", "-m", "pcgl2cache.pipeline.l2cache.setup"),
}
SETUP_SUFFIX = "_setup"  # `commands.<stage>_setup`
EXIST_OK = "--exist-ok"  # PyChunkedGraph's ingest setup: the graph may exist already
FIRST_LAYER = 2  # layer 1 is the supervoxel layer, never a Job

LastLayer = Literal["root", "layer2", "mesh"]


class PlanError(ValueError):
    """The requested stages do not fit the config (the message names the fix)."""


@dataclass(frozen=True)
class Stage:
    """One pass of a build over the chunked graph's layers."""

    name: str
    depends_on: tuple[str, ...] = ()  # stages complete before this one's first layer starts
    last_layer: LastLayer = "root"  # "layer2": one pass; "mesh": mesh_config.max_layer or root
    dataset_block: str | None = None  # dataset key that adds the stage to the default build
    in_default_build: bool = True  # False: only when asked for (the migration passes)
    listed: int = 0  # position in the default build as shown to operators (meshing first)


# In DAG order: a run lists its stages in this order.
STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage("ingest"),
        Stage("l2cache", ("ingest",), "layer2", "l2cache_config", listed=2),
        Stage("meshing", ("ingest",), "mesh", "mesh_config", listed=1),
        # The order of cave-pipeline 0.0.4's stages.py (its README says cleanup first, its
        # code runs the cleanup after the migration): `migrate`, then `migrate_cleanup`.
        Stage("migrate", in_default_build=False),
        Stage("migrate_cleanup", ("migrate",), in_default_build=False),
    )
}
STAGE_NAMES: tuple[str, ...] = tuple(STAGES)
# Stages whose pods write done markers when they run an image: PyChunkedGraph's ingest
# workers (the predecessor's harness). Its meshing and migration workers and the L2 cache's
# are idempotent and lock-free and write none.
IMAGE_MARKED_STAGES = ("ingest",)


def writes_done_markers(workloads: Mapping[str, str], stage: str) -> bool:
    """True when the pods of `stage` mark each chunk done in the ledger: this project's worker
    (a `workloads.<stage>` plugin) always does, an image only for IMAGE_MARKED_STAGES."""
    return bool((workloads.get(stage) or "").strip()) or stage in IMAGE_MARKED_STAGES


def stage(name: str) -> Stage:
    """The stage called `name`, or PlanError listing the known ones."""
    try:
        return STAGES[name]
    except KeyError:
        raise PlanError(f"unknown stage {name!r}: expected {', '.join(STAGE_NAMES)}") from None


def dependencies(name: str) -> tuple[str, ...]:
    """Stages that must be complete before `name`'s first layer may start."""
    return stage(name).depends_on


def dependencies_in(name: str, stages: Iterable[str]) -> list[str]:
    """The stages `name` waits for among those a run builds (`stages`): a stage the run does
    not build is not waited for."""
    built = set(stages)
    return [d for d in dependencies(name) if d in built]


class SetupConfigError(PlanError):
    """A stage's setup command cannot be built from the config (the message names the key)."""
