"""Stage selection: which stages and layers a config runs, and each stage's setup command.

The stages' vocabulary (names, dependencies, default commands) is `shared.model.stages`; this
module applies it to a config: the default build DAG of a dataset, a requested stage list
checked against it, the layers each stage runs and the command of its setup pass. Pure module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.model.layers import layer_count
from shared.model.stages import (
    EXIST_OK,
    FIRST_LAYER,
    PCG_SETUP,
    SETUP_SUFFIX,
    STAGE_NAMES,
    STAGES,
    WORKER_SETUP,
    PlanError,
    SetupConfigError,
    stage,
)

if TYPE_CHECKING:  # annotations only: the config models import the stage vocabulary
    from shared.config.config import PipelineConfig


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
    if all(cave) and not _registered_by_cave_config(cfg, *map(str, cave)):
        # registers the graph with CAVE auth so its graphene volume is readable
        args += ["--cave-host", cave[0], "--cave-dataset", cave[1], "--cave-service", cave[2]]
    return args


def _registered_by_cave_config(cfg: PipelineConfig, host: str, dataset: str, service: str) -> bool:
    """Whether the dataset's `cave_config` registers the mapping the L2 cache setup would
    (same host and service; the table is the graph in both). Then the setup is not asked to:
    middle_auth keeps one mapping per (service, table) and answers a second POST 422, on which
    PCGL2Cache's setup raises, failing the stage (docs/setup-passes.md#cave-registration). The
    same mapping to another dataset can never be made twice: refused."""
    cc = cfg.ds.cave_config or {}
    if not cc.get("host") or not cc.get("dataset"):
        return False
    same_host = str(cc["host"]).rstrip("/") == host.rstrip("/")
    if not same_host or str(cc.get("service") or "pychunkedgraph") != service:
        return False
    if str(cc["dataset"]) != dataset:
        raise SetupConfigError(
            f"dataset cave_config.dataset {cc['dataset']!r} and l2cache_config.cave_dataset "
            f"{dataset!r} map graph {cfg.graph_id} under service {service} to two datasets; "
            "CAVE keeps one mapping per table: make them agree (or drop l2cache_config's "
            "cave_* keys, cave_config registers the graph)"
        )
    return True
