"""What a stage is: its name, the stages it waits for, the layers it runs, its default command.

The one home of the build DAG's vocabulary (docs/architecture.md#one-home-per-contract): config
validation, the build plan, the run state's dependency checks, the manifest and the CLI all ask
this module. Ingest runs layer 2 to the root; meshing (present when the dataset has
`mesh_config`) from layer 2 to `mesh_config.max_layer` or the root; l2cache (present with
`l2cache_config`) is a single layer-2 pass; the migration is two passes over every layer, the
cleanup after it. Each stage has a setup pass (`setup_command`) that runs once before its first
layer. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from shared.layers import layer_count

if TYPE_CHECKING:  # config imports this module for the stage names
    from shared.config import PipelineConfig

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


def _has_block(cfg: PipelineConfig, block: str) -> bool:
    return getattr(cfg.ds, block) is not None


def default_stages(cfg: PipelineConfig) -> list[str]:
    """The build DAG the dataset configures: ingest, then meshing and l2cache if configured."""
    return [
        s.name
        for s in sorted(STAGES.values(), key=lambda s: s.listed)
        if s.in_default_build and (s.dataset_block is None or _has_block(cfg, s.dataset_block))
    ]


def check_stages(cfg: PipelineConfig, names: list[str]) -> list[str]:
    """Validate a requested stage list; returns it in DAG order."""
    for name in names:
        s = stage(name)
        if s.dataset_block is not None and not _has_block(cfg, s.dataset_block):
            raise PlanError(f"stage {name} needs a {s.dataset_block} block in the dataset file")
    return sorted(dict.fromkeys(names), key=STAGE_NAMES.index)


def top_layer(cfg: PipelineConfig, name: str) -> int:
    """The last layer a stage builds."""
    root = layer_count(cfg.layer2_shape(), cfg.ds.graph_config.FANOUT)
    last = stage(name).last_layer
    if last == "layer2":
        return FIRST_LAYER
    mesh = cfg.ds.mesh_config
    if last == "mesh" and mesh is not None and mesh.max_layer:
        # Past the root it stops at the root, as the predecessor clamped it (load_config
        # notes it).
        return min(mesh.max_layer, root)
    return root


def stage_layers(cfg: PipelineConfig, name: str) -> range:
    """Every layer a stage runs, lowest first."""
    return range(FIRST_LAYER, top_layer(cfg, name) + 1)


class SetupConfigError(PlanError):
    """A stage's setup command cannot be built from the config (the message names the key)."""


def image_owns_table(cfg: PipelineConfig) -> bool:
    """Whether the graph's table is the ingest image's to create: ingest runs an image's
    entry point (`commands.ingest`), whose setup creates the table with the graph's
    metadata, so nothing else may create it first (docs/setup-passes.md). Otherwise ingest
    is our worker's (a `workloads` plugin) and `pipeline setup` may create the table."""
    return "ingest" in cfg.commands


def runs_pcg_ingest_setup(cfg: PipelineConfig, name: str) -> bool:
    """Whether stage `name`'s setup is PyChunkedGraph's ingest setup (the default of an
    image-run ingest, or an override that runs its module): it creates the graph's table,
    fails if the table exists, and skips creating the graph with `--exist-ok`."""
    try:
        argv = setup_command(cfg, name)
    except PlanError:
        return False
    return argv is not None and PCG_SETUP["ingest"][-1] in argv


def setup_command(cfg: PipelineConfig, name: str, exist_ok: bool = False) -> list[str] | None:
    """The command of stage `name`'s setup pass, or None when it has none (turned off with
    `commands.<stage>_setup: []`). `exist_ok` (the graph's table holds its metadata already)
    adds `--exist-ok` to PyChunkedGraph's ingest setup, default or override."""
    stage(name)
    override = cfg.commands.get(name + SETUP_SUFFIX)
    if override is not None:
        argv = list(override)
        if exist_ok and PCG_SETUP["ingest"][-1] in argv and EXIST_OK not in argv:
            argv.append(EXIST_OK)
        return argv or None
    if name not in cfg.commands:
        return list(WORKER_SETUP)  # a workloads plugin: the worker's setup entry
    argv = [*PCG_SETUP[name], cfg.graph_id]
    if name == "ingest":
        if (cfg.ds.ingest_config or {}).get("AGGLOMERATION"):
            argv.append("--raw")  # an agglomeration source implies the raw input path
        if exist_ok:
            argv.append(EXIST_OK)
    elif name == "l2cache":
        argv = [*PCG_SETUP[name], *_l2cache_setup_args(cfg)]
    return argv


def _l2cache_setup_args(cfg: PipelineConfig) -> list[str]:
    lc = cfg.ds.l2cache_config or {}
    table, cv = lc.get("table_id"), lc.get("cv_path")
    if not (table and cv):
        raise SetupConfigError(
            "dataset l2cache_config: the l2cache setup needs table_id and cv_path (or set "
            "commands.l2cache_setup)"
        )
    args = [str(table), cfg.graph_id, str(cv)]
    cave = [lc.get(k) for k in ("cave_host", "cave_dataset", "cave_service")]
    if any(cave) and not all(cave):
        raise SetupConfigError(
            "dataset l2cache_config: cave_host, cave_dataset and cave_service go together"
        )
    if all(cave):  # registers the graph with CAVE auth so its graphene volume is readable
        args += ["--cave-host", cave[0], "--cave-dataset", cave[1], "--cave-service", cave[2]]
    return args
