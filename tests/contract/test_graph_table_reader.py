"""The controller's reader of a graph's table on the Bigtable emulator: absent, created empty
(an old `pipeline setup`), set up by the demo, set up by an image (a pickled object of a class
the controller does not have), as kvdbclient and PyChunkedGraph leave the metadata cell."""

from __future__ import annotations

import uuid

from adapters.bigtable.graph_meta_store import BigtableGraphTables, write_graph_meta
from shared.model.graph_meta import GraphMeta
from shared.ports.graph_table import GraphTable, TableState
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

META = GraphMeta((0, 0, 0), (64, 64, 64), (16, 16, 16), 4)


def read(table_id: str) -> GraphTable:
    return BigtableGraphTables().read(table_id, BIGTABLE_PROJECT, BIGTABLE_INSTANCE)


def test_each_state_of_a_graph_table_reads_as_such(bigtable_client):
    absent = f"absent-{uuid.uuid4().hex[:8]}"
    bigtable_client(f"other-{uuid.uuid4().hex[:8]}", create=True)  # the instance exists
    assert read(absent) == GraphTable(absent, TableState.ABSENT)

    empty = f"empty-{uuid.uuid4().hex[:8]}"
    bigtable_client(empty, create=True)  # kvdbclient's create_table(None, ...)
    assert read(empty) == GraphTable(empty, TableState.NO_METADATA)

    demo = f"demo-{uuid.uuid4().hex[:8]}"
    write_graph_meta(bigtable_client(demo, create=True), META)
    assert read(demo) == GraphTable(demo, TableState.METADATA, META)

    image = f"image-{uuid.uuid4().hex[:8]}"
    client = bigtable_client(image, create=True)
    # What an image's ingest setup leaves: its own metadata object, pickled by the client.
    # Unpickling it would run its code (here: fail the test); the controller's read must not.
    client.update_table_meta(_ImageMeta())
    assert read(image) == GraphTable(image, TableState.METADATA)


class _ImageMeta:
    """Stands for PyChunkedGraph's ChunkedGraphMeta."""

    def __reduce__(self):
        return (_explode, ())


def _explode():  # what unpickling the cell would run
    raise AssertionError("the controller unpickled an image's metadata object")


def test_our_workers_setup_leaves_the_planned_metadata_when_its_plugin_writes_none(
    emulators, capsys
):
    """The stage that makes the table leaves the graph's metadata in it: a plugin without a
    setup of its own gets the grid the controller planned (and a table with metadata keeps
    its own)."""
    from worker.logs import JsonLogger
    from worker.setup import run

    graph = f"w-{uuid.uuid4().hex[:8]}"
    env = {
        "PCG_GRAPH_ID": graph,
        "PCG_WORKLOAD": "tests.builders.plugins:nap",  # its module has no setup
        "PCG_GRID_SHAPE": "4,4,4",
        "PCG_N_LAYERS": "4",
        "PCG_DATASET_JSON": '{"data_source": {"size": [64, 64, 60]}, '
        '"graph_config": {"CHUNK_SIZE": [16, 16, 16]}}',
        "BIGTABLE_PROJECT": BIGTABLE_PROJECT,
        "BIGTABLE_INSTANCE": BIGTABLE_INSTANCE,
    }
    assert run(env, JsonLogger()) == 0
    planned = GraphMeta((0, 0, 0), (64, 64, 60), (16, 16, 16), 4)
    assert read(graph) == GraphTable(graph, TableState.METADATA, planned)
    assert '"graph_meta"' in capsys.readouterr().out  # reported as before
    env["PCG_DATASET_JSON"] = env["PCG_DATASET_JSON"].replace("60", "64")
    assert run(env, JsonLogger()) == 0
    assert read(graph).meta == planned  # kept: a graph is set up once
