"""What the controller observes of a graph's table around a setup pass, and the port it reads
it through. Pure module (docs/setup-passes.md).

A graph's table holds its metadata in one cell, row ``meta``, column ``0:meta`` (kvdbclient's
``TableMeta``, PyChunkedGraph's ``GraphMeta``: the same cell, pickled). PyChunkedGraph's ingest
setup creates the table and writes that cell in one call; run again it fails "already exists",
and with ``--exist-ok`` it skips creating the graph. So before an image's ingest setup the
controller reads the table's state: absent (run it plain), with metadata (run it with
``--exist-ok``: a re-run on an existing graph) or without (refused: nothing would ever write the
metadata). After any setup the cell must be there, or the setup failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from shared.model.graph_meta import GraphMeta

META_ROW = b"meta"  # the row of a graph's metadata (kvdbclient TableMeta.key)
META_FAMILY, META_COLUMN = "0", b"meta"  # its column (TableMeta.Meta)


class TableState(StrEnum):
    """A graph's table as observed: absent, present without graph metadata, or with it."""

    ABSENT = "absent"
    NO_METADATA = "no-metadata"  # no metadata cell, or one holding None (an empty create)
    METADATA = "metadata"


@dataclass(frozen=True)
class GraphTable:
    """One read of a graph's table: its state and, when the metadata is this project's own
    record (the demo's, our worker's), that record; a PyChunkedGraph image's metadata (a
    pickled ChunkedGraphMeta, never unpickled here) leaves `meta` None."""

    table_id: str
    state: TableState
    meta: GraphMeta | None = None

    @property
    def has_metadata(self) -> bool:
        return self.state is TableState.METADATA


class GraphTableReader(Protocol):
    """The port the controller reads a graph's table through (the Bigtable adapter:
    `adapters.bigtable.graph_meta_store.BigtableGraphTables`)."""

    def read(self, table_id: str, project: str, instance: str) -> GraphTable:
        """The table's state; raises on an unreachable Bigtable (the reconcile is retried)."""
        ...


class NoGraphTableReader:
    """The reader of a controller built without one: a setup pass that needs its table read
    fails the reconcile with this message instead of guessing."""

    def read(self, table_id: str, project: str, instance: str) -> GraphTable:
        raise RuntimeError(
            f"graph table {table_id}: this controller has no graph-table reader; build it "
            "with graph_tables=BigtableGraphTables() (adapters.wiring does)"
        )


def describe(table: GraphTable, project: str = "", instance: str = "") -> str:
    """The table's state in an operator's words (for `pipeline setup` and the refusals)."""
    where = f" in {project}/{instance}" if project and instance else ""
    if table.state is TableState.ABSENT:
        return f"table {table.table_id}{where} does not exist"
    if table.state is TableState.NO_METADATA:
        return (
            f"table {table.table_id}{where} exists without graph metadata (no row "
            f"{META_ROW.decode()}, column {META_FAMILY}:{META_COLUMN.decode()})"
        )
    return f"table {table.table_id}{where} holds the graph's metadata"


def delete_table_fix(table_id: str, project: str, instance: str) -> str:
    """How an operator removes an empty table (nothing in it is lost: it has no graph)."""
    return (
        f"delete the empty table (`cbt -project {project} -instance {instance} deletetable "
        f"{table_id}`)"
    )
