"""``python -m worker.setup``: a stage's setup pass, for stages run by our worker.

The controller runs it as a one-pod Job before the stage's first layer (``shared.jobs.setup_job``).
It calls the stage plugin's module-level ``setup(ctx)`` when the module of ``PCG_WORKLOAD``
has one (the demo's ingest writes the graph metadata there), then reports the graph metadata
the table holds as one JSON line (``shared.model.graph_meta.report_line``), which the controller
checks against its grid before the stage's first layer starts.

Environment (``shared.model.worker_contract.setup_env``): ``PCG_GRAPH_ID``, ``PCG_STAGE``,
``PCG_RUN_ID``, ``PCG_WORKLOAD`` (optional), ``PCG_GRID_SHAPE`` (the planned layer-2 grid),
``PCG_N_LAYERS``, ``BIGTABLE_PROJECT``, ``BIGTABLE_INSTANCE``, ``PCG_DATASET_JSON``.
Exit codes: 0 done, 1 transient (e.g. Bigtable unreachable), 42 bad configuration or input
(the plugin's setup raised FatalChunkError: logged as "setup failed: ..." with its traceback).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from worker.errors import EXIT_FATAL, EXIT_TRANSIENT, FatalChunkError, WorkerConfigError
from worker.logs import JsonLogger

SETUP_ATTR = "setup"


@dataclass
class SetupContext:
    """What a plugin's ``setup`` gets: the graph, its planned geometry, its table's client."""

    graph_id: str
    stage: str
    run_id: str
    layer2_shape: tuple[int, int, int]
    n_layers: int
    dataset: dict[str, Any]
    client: Any  # the kvdbclient BigTableClient of the graph's table (created if missing)
    logger: JsonLogger


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise WorkerConfigError(f"{name} is not set: the setup Job's manifest must set it")
    return value


def _plugin_setup(workload: str) -> Any:
    """The ``setup`` of the plugin's module, or None when it has none."""
    if not workload:
        return None
    from worker.plugins import load_workload

    module_name = workload.partition(":")[0]
    try:
        return load_workload(f"{module_name}:{SETUP_ATTR}")
    except WorkerConfigError as exc:
        if f"has no {SETUP_ATTR}" in str(exc):
            return None
        raise


def planned_meta(fields: Mapping[str, Any]) -> Any:
    """The graph metadata of the grid the controller planned: voxel bounds from the dataset's
    `data_source.size` (else the grid times the chunk size), its chunk size, the layer count."""
    from shared.model.graph_meta import GraphMeta

    grid = tuple(fields["layer2_shape"])
    chunk = tuple(int(v) for v in fields["dataset"]["graph_config"]["CHUNK_SIZE"])
    size = fields["dataset"].get("data_source", {}).get("size")
    hi = (
        tuple(int(v) for v in size)
        if size
        else tuple(g * c for g, c in zip(grid, chunk, strict=True))
    )
    return GraphMeta((0, 0, 0), hi, chunk, int(fields["n_layers"]))  # type: ignore[arg-type]


def run(env: Mapping[str, str], log: JsonLogger) -> int:
    """Run the setup pass; returns the exit code."""
    from adapters.bigtable.chunk_ledger import close_bigtable_client, open_bigtable_client
    from adapters.bigtable.graph_meta_store import read_graph_meta, write_graph_meta
    from shared.model.graph_meta import report_line

    try:
        grid = tuple(int(v) for v in _required(env, "PCG_GRID_SHAPE").split(","))
        ctx_fields = {
            "graph_id": _required(env, "PCG_GRAPH_ID"),
            "stage": env.get("PCG_STAGE", "ingest"),
            "run_id": env.get("PCG_RUN_ID", ""),
            "layer2_shape": grid,
            "n_layers": int(_required(env, "PCG_N_LAYERS")),
            "dataset": json.loads(_required(env, "PCG_DATASET_JSON")),
        }
        project = _required(env, "BIGTABLE_PROJECT")
        instance = _required(env, "BIGTABLE_INSTANCE")
        fn = _plugin_setup(env.get("PCG_WORKLOAD", "").strip())
    except (WorkerConfigError, ValueError) as exc:
        log.error(f"bad setup environment: {exc}", exit_code=EXIT_FATAL)
        return EXIT_FATAL
    try:
        client = open_bigtable_client(
            ctx_fields["graph_id"], project, instance, timedelta(seconds=60), create=True
        )
    except Exception as exc:  # noqa: BLE001 - e.g. credentials or the emulator not ready
        log.error(f"cannot open Bigtable table {ctx_fields['graph_id']!r}: {exc!r}", exit_code=1)
        return EXIT_TRANSIENT
    try:
        if fn is not None:
            try:
                fn(SetupContext(client=client, logger=log, **ctx_fields))
            except (FatalChunkError, WorkerConfigError) as exc:  # the input cannot be set up
                tb = traceback.format_exc()
                log.error(f"setup failed: {exc}", traceback=tb, exit_code=EXIT_FATAL)
                return EXIT_FATAL
        meta = read_graph_meta(client)
        if meta is None and client.table_meta is None:  # as read_graph_meta read it
            # The stage that made the table leaves the graph's metadata in it (the controller
            # counts a setup only then: docs/setup-passes.md); a plugin without a setup of its
            # own gets the planned geometry.
            meta = planned_meta(ctx_fields)
            write_graph_meta(client, meta)
            log.info("graph metadata written from the planned grid", metadata=meta.to_dict())
    finally:
        close_bigtable_client(client)
    if meta is not None:
        print(report_line(meta), flush=True)
    log.info("setup done", metadata=meta.to_dict() if meta else None)
    return 0


def main() -> int:
    log = JsonLogger(run=os.environ.get("PCG_RUN_ID", ""), stage=os.environ.get("PCG_STAGE", ""))
    try:
        return run(os.environ, log)
    except WorkerConfigError as exc:
        log.error(f"setup refused: {exc}", exit_code=EXIT_FATAL)
        return EXIT_FATAL


if __name__ == "__main__":
    _code = EXIT_TRANSIENT
    try:
        _code = main()
    except BaseException as _exc:  # noqa: BLE001 - never leave without a log line and a code
        JsonLogger().error(f"setup crashed: {_exc!r}", traceback=traceback.format_exc())
    finally:
        sys.stdout.flush()
        os._exit(_code)  # the Bigtable client leaves a non-daemon thread behind
