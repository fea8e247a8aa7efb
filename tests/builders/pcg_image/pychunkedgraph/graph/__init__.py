"""Stand-in for the part of PyChunkedGraph's `pychunkedgraph.graph` the graph probe reads
(`shared.jobs.graph_probe`): ``ChunkedGraph(graph_id=...).meta`` with ``voxel_bounds``,
``graph_config.CHUNK_SIZE``, ``layer_count`` and ``layer_chunk_bounds``.

The metadata comes from the graph's table (the stand-in setup's record: the watershed's
voxel bounds and the chunk size), and the derived numbers are computed the way
PyChunkedGraph's ``ChunkedGraphMeta`` computes them (pychunkedgraph/graph/meta.py): voxel
counts = upper bound - lower bound; layer-2 chunk bounds = ceil(counts / CHUNK_SIZE);
``layer_count`` = ceil(log(max chunks) / log(FANOUT)) + 2 in floating point; the chunk bounds
of layer L < layer_count = ceil(layer-2 bounds / 2**(L-2)). The client reads
``BIGTABLE_PROJECT`` and ``BIGTABLE_INSTANCE`` from the environment, as kvdbclient's default
config does in the image.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
from kvdbclient import BigTableClient

GraphConfig = namedtuple("GraphConfig", ["ID", "CHUNK_SIZE", "FANOUT"])


class ChunkedGraphMeta:
    """The graph's geometry from its table's metadata record."""

    def __init__(self, graph_id: str, record: dict[str, Any]) -> None:
        self._lo = np.array(record["bounds_lo"], dtype=int)
        self._hi = np.array(record["bounds_hi"], dtype=int)
        self.graph_config = GraphConfig(graph_id, list(record["chunk_size"]), 2)

    @property
    def voxel_bounds(self) -> np.ndarray:
        """[[lo, hi] per axis], as PyChunkedGraph returns the watershed's bounds."""
        return np.stack([self._lo, self._hi], axis=1)

    @property
    def voxel_counts(self) -> np.ndarray:
        return self._hi - self._lo

    def _chunks_boundary(self) -> np.ndarray:
        return np.ceil(self.voxel_counts / np.array(self.graph_config.CHUNK_SIZE)).astype(int)

    @property
    def layer_count(self) -> int:
        fanout = self.graph_config.FANOUT
        return int(np.ceil(np.log(np.max(self._chunks_boundary())) / np.log(fanout))) + 2

    @property
    def layer_chunk_bounds(self) -> dict[int, np.ndarray]:
        bounds = self._chunks_boundary()
        return {
            layer: np.ceil(bounds / (2 ** (layer - 2))).astype(int)
            for layer in range(2, self.layer_count)
        }


class ChunkedGraph:
    """Opens a graph by id and reads its metadata from the table, as PyChunkedGraph does."""

    def __init__(self, graph_id: str) -> None:
        client = BigTableClient(str(graph_id))
        try:
            record = client.read_table_meta()
        finally:
            client.close()
        if not isinstance(record, dict):
            raise ValueError(f"graph {graph_id}: no graph metadata in its table")
        self.meta = ChunkedGraphMeta(graph_id, record)
