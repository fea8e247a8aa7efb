"""The graph metadata row of a graph's table (kvdbclient's table-meta cell), as the demo's
setup writes it and its workers read it (`shared.graph_meta.GraphMeta`, stored as a dict).

PyChunkedGraph keeps its own ChunkedGraphMeta object in the same cell; a value that is not a
record of ours reads as None, so a table set up by a PyChunkedGraph image is never misread.
"""

from __future__ import annotations

from typing import Any

from shared.graph_meta import GraphMeta, GraphMetaError

KIND = "cave-pipeline/graph-meta"  # marks our record among whatever else may sit there


def read_graph_meta(client: Any) -> GraphMeta | None:
    """The graph metadata in the client's table, or None if the table has none of ours."""
    raw = client.read_table_meta()
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        return None
    try:
        return GraphMeta.from_dict(raw)
    except GraphMetaError:
        return None


def write_graph_meta(client: Any, meta: GraphMeta) -> None:
    """Write `meta` as the table's graph metadata (replacing what is there)."""
    client.update_table_meta({"kind": KIND, **meta.to_dict()})
