"""The Bigtable tables a config's stages need before their first Job, and who makes each.

- The graph's table: every stage's claims and done markers live there. Ingest run by our
  worker: `pipeline setup` creates it (empty; the setup pass writes the metadata). Ingest run
  by an image (`commands.ingest`): its own setup pass creates it with the graph's metadata,
  so nothing else may (docs/setup-passes.md).
- The tables a stage's workload writes besides the graph's: a `workloads` plugin module may
  declare them with a module-level `tables(graph_id) -> list[str]` (the demo's l2cache and
  meshing passes write `<graph>-l2cache` and `<graph>-meshes`). `pipeline setup` creates
  them; a stage run by an image makes its own tables in its setup pass.

One list, read by `pipeline setup` (creates what is ours), `pipeline demo` (opens them) and
`pipeline start`'s preflight (refuses a run whose tables are missing).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from shared.config.config import ConfigError, PipelineConfig
from shared.config.stage_selection import image_owns_table

TABLES_ATTR = "tables"  # a plugin module's `tables(graph_id) -> list[str]`


@dataclass(frozen=True)
class StageTable:
    """A table a run needs: its id, the stage that needs it, and whether `pipeline setup`
    makes it (`ours`; False: an image's ingest setup makes it)."""

    table_id: str
    stage: str
    ours: bool = True


def workload_tables(cfg: PipelineConfig, stage: str) -> list[str]:
    """The tables stage `stage`'s workload writes besides the graph's: its plugin module's
    `tables(graph_id)`, none for a plugin without one or a stage run by an image. A plugin
    that cannot be imported is a ConfigError naming `workloads.<stage>`."""
    path = cfg.workloads.get(stage, "")
    if stage in cfg.commands or not path:
        return []
    module_name = path.partition(":")[0]
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - ImportError, errors at import time
        raise ConfigError(f"workloads.{stage}: cannot import {module_name}: {e!r}") from None
    declared = getattr(module, TABLES_ATTR, None)
    return [str(t) for t in declared(cfg.graph_id)] if callable(declared) else []


def stage_tables(cfg: PipelineConfig, stages: list[str]) -> list[StageTable]:
    """Every table the run of `stages` needs, the graph's first, each once."""
    found = [StageTable(cfg.graph_id, "ingest", ours=not image_owns_table(cfg))]
    for stage in stages:
        found += [StageTable(t, stage) for t in workload_tables(cfg, stage)]
    seen: set[str] = set()
    return [t for t in found if not (t.table_id in seen or seen.add(t.table_id))]


def extra_tables(cfg: PipelineConfig, stages: list[str]) -> list[StageTable]:
    """The tables besides the graph's (which the doctor's graph-table check judges)."""
    return [t for t in stage_tables(cfg, stages) if t.table_id != cfg.graph_id]
