"""The graph metadata cell of a graph's table (row ``meta``, column ``0:meta``: kvdbclient's
``TableMeta``, PyChunkedGraph's ``GraphMeta``), as the demo's setup writes it and its workers
read it (`shared.model.graph_meta.GraphMeta`, stored as a dict), and as the controller observes it
around a setup pass (:class:`BigtableGraphTables`, docs/setup-passes.md).

PyChunkedGraph keeps its own ChunkedGraphMeta object in the same cell; a value that is not a
record of ours reads as None, so a table set up by a PyChunkedGraph image is never misread,
and the controller's read never unpickles it (no class is ever loaded from the cell).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from shared.model.graph_meta import GraphMeta, GraphMetaError
from shared.ports.graph_table import META_COLUMN, META_FAMILY, META_ROW, GraphTable, TableState

KIND = "cave-pipeline/graph-meta"  # marks our record among whatever else may sit there


def read_graph_meta(client: Any) -> GraphMeta | None:
    """The graph metadata in the client's table, or None if the table has none of ours."""
    raw = client.read_table_meta()
    return _our_record(raw)


def write_graph_meta(client: Any, meta: GraphMeta) -> None:
    """Write `meta` as the table's graph metadata (replacing what is there)."""
    client.update_table_meta(meta_record(meta))


def meta_record(meta: GraphMeta) -> dict[str, Any]:
    """The value this project keeps in the metadata cell for `meta` (pickled by kvdbclient)."""
    return {"kind": KIND, **meta.to_dict()}


def _our_record(raw: Any) -> GraphMeta | None:
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        return None
    try:
        return GraphMeta.from_dict(raw)
    except GraphMetaError:
        return None


class _ForeignObject(Exception):
    """The cell holds an object of some class (PyChunkedGraph's ChunkedGraphMeta)."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickles plain data only (dicts, lists, numbers, strings, None): any class or
    function reference stops it, so reading a cell never imports or runs anything."""

    def find_class(self, module: str, name: str) -> Any:
        raise _ForeignObject(f"{module}.{name}")


def decode_meta_cell(table_id: str, value: bytes | None) -> GraphTable:
    """The table's state from its metadata cell's bytes (None: no cell). A pickled None (what
    an empty create writes) is no metadata; any other value is metadata, decoded only when
    it is this project's own record."""
    if value is None:
        return GraphTable(table_id, TableState.NO_METADATA)
    try:
        raw = _PlainDataUnpickler(io.BytesIO(value)).load()
    except _ForeignObject:
        return GraphTable(table_id, TableState.METADATA)  # an image's own metadata object
    except Exception:  # noqa: BLE001 - not a pickle of ours: something else wrote it
        return GraphTable(table_id, TableState.METADATA)
    if raw is None:
        return GraphTable(table_id, TableState.NO_METADATA)
    return GraphTable(table_id, TableState.METADATA, _our_record(raw))


class BigtableGraphTables:
    """The controller's reader of graph tables (`shared.ports.graph_table.GraphTableReader`): one
    read of the metadata cell through the Bigtable data API (honors
    ``BIGTABLE_EMULATOR_HOST``); a table that does not exist reads as absent. Needs
    ``bigtable.tables.readRows`` on the instance (roles/bigtable.reader)."""

    def read(self, table_id: str, project: str, instance: str) -> GraphTable:
        from google.api_core.exceptions import NotFound
        from google.cloud.bigtable.data import BigtableDataClient, row_filters

        only_meta = row_filters.RowFilterChain(
            [
                row_filters.FamilyNameRegexFilter(META_FAMILY),
                row_filters.ColumnQualifierRegexFilter(b"^" + META_COLUMN + b"$"),
                row_filters.CellsColumnLimitFilter(1),
            ]
        )
        client = BigtableDataClient(project=project)
        try:
            table = client.get_table(instance, table_id)
            try:
                row = table.read_row(META_ROW, row_filter=only_meta)
            finally:
                table.close()
        except NotFound:
            return GraphTable(table_id, TableState.ABSENT)
        finally:
            client.close()
        cells = list(row.cells) if row is not None else []
        return decode_meta_cell(table_id, cells[0].value if cells else None)
