"""The demo's setup pass: the graph's metadata (voxel bounds, chunk size, layer count) in its
table, as PyChunkedGraph's ingest setup writes its graph's.

The bounds come from the volume itself (the watershed), never from `data_source.size`: like
PyChunkedGraph, the graph's geometry is the data's, and the workers read their grid from this
record (`worker.__main__`). A table that already holds metadata keeps it (a graph is set up
once); the controller then refuses a run whose grid disagrees with it.

`demo.ingest` exposes :func:`setup` as its plugin's setup (run by ``python -m worker.setup``);
``python -m demo.setup`` runs it on its own (an image entry point for the setup pass).
"""

from __future__ import annotations

import os
from typing import Any

from adapters.bigtable.graph_meta_store import read_graph_meta, write_graph_meta
from demo.common import volume
from shared.model.graph_meta import GraphMeta
from shared.model.layers import layer_count


def graph_meta(dataset: dict[str, Any]) -> GraphMeta:
    """The graph's metadata from its volume (bounds) and dataset (chunk size)."""
    vol = volume(str(dataset["data_source"].get("watershed", "")))
    chunk = tuple(int(v) for v in dataset["graph_config"]["CHUNK_SIZE"])
    size = tuple(int(v) for v in vol.shape)
    l2 = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
    fanout = int(dataset["graph_config"].get("FANOUT", 2))
    return GraphMeta((0, 0, 0), size, chunk, layer_count(l2, fanout))  # type: ignore[arg-type]


def setup(ctx: Any) -> None:
    """Write the graph metadata unless the table has it already."""
    meta = graph_meta(ctx.dataset)
    existing = read_graph_meta(ctx.client)
    if existing is None:
        write_graph_meta(ctx.client, meta)
        ctx.logger.info("graph metadata written", metadata=meta.to_dict())
    elif existing != meta:
        ctx.logger.warning(
            "the table holds graph metadata for another volume: kept",
            existing=existing.to_dict(),
            volume=meta.to_dict(),
        )


def main() -> int:
    """``python -m demo.setup``: the worker's setup entry with this module's setup."""
    from worker.setup import main as setup_main

    os.environ["PCG_WORKLOAD"] = "demo.setup:setup"
    return setup_main()


if __name__ == "__main__":
    import sys

    _code = 1
    try:
        _code = main()
    finally:
        sys.stdout.flush()
        os._exit(_code)
