"""A PyChunkedGraph-style ingest entry point on the predecessor's published harness.

Run as ``python -m tests.builders.pcg_ingest`` by a Python 3.12 interpreter that has
``cave-pipeline[distribution]==0.0.4`` (and scipy, for the demo's layer-2 labelling): it does
what a PyChunkedGraph image's ``pychunkedgraph.pipeline.ingest`` does with that harness, but
builds the demo's miniature chunked graph, so the demo's oracle can judge the result.

- ``cave_pipeline.distribution.harness.run`` reads the Indexed-Job env (``PCG_GRAPH_ID``,
  ``PCG_LAYER``, ``PCG_PERM_SEED``, ``PCG_BATCH_SIZE`` used as is, ``JOB_COMPLETION_INDEX``,
  ``PCG_N_PROCESSES``), asks ``bounds_fn`` for the layer's grid and runs the window;
- the lock is the predecessor's (``cave_pipeline.distribution.lock``: acquire, renew, fenced
  ``mark_done``, release) driven as PyChunkedGraph's ingest worker drives it
  (tests/builders/pcg_image_lock.py): the claim lives for the client's lock expiry, the
  graph's ``graph_config.ROOT_LOCK_EXPIRY`` (3 min by default), and is renewed every
  ``60 s x (L-1) x PCG_LOCK_EXPIRY_SCALE`` while the chunk runs;
- ``run_and_exit`` leaves through ``os._exit`` with the harness's code (0, 1 or 42).

Like the images, the grid comes from the graph, not from ``PCG_GRID_SHAPE``: the setup pass
(``python -m demo.setup``) wrote the graph metadata into the table, and ``bounds_fn`` reads the
grid from there.
Each chunk logs one JSON line (``pcg_chunk``) so a test can count chunks per pod.

This module imports only what a 3.12 venv with the harness has plus the repository's pure
modules and the demo (``PYTHONPATH`` = the repository root); never the controller.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any


class _Logger:
    """The few methods the demo workloads call on ``ctx.logger``, as JSON lines."""

    def __init__(self, layer: int, index: int) -> None:
        self.fields = {"layer": layer, "index": index}

    def _emit(self, severity: str, message: str, **extra: Any) -> None:
        print(json.dumps({"severity": severity, "message": message, **self.fields, **extra}))

    def info(self, message: str, **extra: Any) -> None:
        self._emit("INFO", message, **extra)

    def warning(self, message: str, **extra: Any) -> None:
        self._emit("WARNING", message, **extra)

    def debug(self, message: str, **extra: Any) -> None:
        pass


class _ChunkContext:
    """What the demo's ``process_chunk`` reads (the fields of ``worker.plugins.ChunkContext``)."""

    def __init__(self, ctx: dict[str, Any], layer: int, coord: tuple[int, int, int], cid: int):
        self.graph_id = ctx["graph_id"]
        self.stage = "ingest"
        self.layer = layer
        self.coord = coord
        self.chunk_id = cid
        self.n_layers = ctx["n_layers"]
        self.dataset = ctx["dataset"]
        self.client = ctx["client"]
        self.logger = ctx["logger"]
        self.run_id = os.environ.get("PCG_RUN_ID", "")


def context_factory(env: dict[str, Any]) -> dict[str, Any]:
    """Once per pod: the graph's geometry and a kvdbclient client whose lock expiry is the
    graph's ROOT_LOCK_EXPIRY, as ``ChunkedGraph`` builds it (the same at every layer)."""
    from kvdbclient import BigTableClient, BigTableConfig

    from adapters.bigtable.graph_meta_store import read_graph_meta
    from demo.common import geometry
    from tests.builders.pcg_image_lock import graph_lock_expiry

    dataset = json.loads(os.environ["PCG_DATASET_JSON"])
    _, _, bits = geometry(dataset)
    expiry = graph_lock_expiry(dataset)
    config = BigTableConfig(
        PROJECT=os.environ["BIGTABLE_PROJECT"],
        INSTANCE=os.environ["BIGTABLE_INSTANCE"],
        ADMIN=False,
        READ_ONLY=False,
    )
    client = BigTableClient(env["graph_id"], config, lock_expiry=expiry)
    meta = read_graph_meta(client)  # what the setup pass wrote
    if meta is None:
        raise RuntimeError(f"table {env['graph_id']} has no graph metadata: run its setup")
    dataset["data_source"]["size"] = list(meta.size)
    return {
        "graph_id": env["graph_id"],
        "dataset": dataset,
        "l2_shape": meta.layer2_shape,
        "n_layers": meta.layer_count,
        "bits": bits,
        "client": client,
        "logger": _Logger(env["layer"], env["index"]),
    }


def bounds_fn(ctx: dict[str, Any], layer: int) -> tuple[int, int, int]:
    """The layer's chunk grid, from the graph's geometry (never from PCG_GRID_SHAPE)."""
    from shared.model.layers import layer_shape

    return layer_shape(ctx["l2_shape"], layer)


def make_processor(ctx: dict[str, Any], layer: int, env: dict[str, Any]):
    """``process_one(coord) -> "ok" | "done" | "transient" | "fatal"`` under the
    predecessor's lock, claimed, renewed and finished as PyChunkedGraph's ingest worker does."""
    from cave_pipeline.distribution import FatalChunkError as HarnessFatal

    from demo.ingest import process_chunk
    from shared.model.layers import chunk_id
    from tests.builders.pcg_image_lock import image_options, image_scale, process_under_claim
    from worker.errors import FatalChunkError

    client, logger = ctx["client"], ctx["logger"]
    opts = image_options(layer, image_scale())

    def process_one(coord: tuple[int, int, int]) -> str:
        cid = chunk_id(layer, coord, ctx["n_layers"], ctx["bits"])
        token = random.getrandbits(63) or 1
        timing = {"started": None}

        def work() -> None:
            timing["started"] = time.monotonic()
            try:
                process_chunk(_ChunkContext(ctx, layer, tuple(coord), cid))
            except (FatalChunkError, HarnessFatal) as exc:
                logger.warning(f"fatal chunk {layer}_{tuple(coord)}: {exc}")
                raise
            except Exception as exc:
                logger.warning(f"transient chunk {layer}_{tuple(coord)}: {exc!r}")
                raise

        outcome = process_under_claim(
            client, cid, token, opts, work, on_fatal=(FatalChunkError, HarnessFatal)
        )
        started = timing["started"]
        elapsed = 0.0 if started is None else round(time.monotonic() - started, 4)
        print(
            json.dumps(
                {
                    "pcg_chunk": list(map(int, coord)),
                    "layer": layer,
                    "index": env["index"],
                    "batch_size": env["batch_size"],  # PCG_BATCH_SIZE as the harness read it
                    "renew_s": opts["renew"],  # the image's renewal interval at this layer
                    "outcome": outcome,
                    "chunk_compute_s": elapsed,
                }
            ),
            flush=True,
        )
        return outcome

    return process_one


def main() -> int:
    """The container entry point: one batch of the layer through the predecessor's harness."""
    from cave_pipeline.distribution.harness import run

    return run(make_processor, context_factory=context_factory, bounds_fn=bounds_fn)


if __name__ == "__main__":
    from cave_pipeline.distribution import run_and_exit

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    run_and_exit(main)
