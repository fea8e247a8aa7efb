"""Stand-in for PyChunkedGraph's one-shot ingest setup, following its contract exactly:

    python -m pychunkedgraph.pipeline.ingest.setup <graph_id> [--raw] [--exist-ok]

Like the real module it reads the dataset yaml mounted at ``PCG_DATASET`` (its
``backend_client.CONFIG``, ``graph_config``, ``data_source``, ``ingest_config.AGGLOMERATION``),
builds the graph's metadata with the agglomeration source in ``custom_data["agg"]`` and creates
the graph in one call, ``create_table(meta, version)`` on a kvdbclient client (what
PyChunkedGraph's ``ChunkedGraph.create`` -> ``create_graph`` does): the table, its column
families, the version row and the metadata cell (row ``meta``, column ``0:meta``, pickled).
If the table exists that call raises ``ValueError("<table> already exists.")``; without
``--exist-ok`` the setup fails with it, with ``--exist-ok`` it skips creating the graph, so it
writes no metadata either.

One difference, so the demo's oracle and the predecessor's harness can use the graph: the
metadata value is this project's record (``graph_meta_store.meta_record``, the geometry from
the watershed volume, as PyChunkedGraph derives it from the watershed's bounds) with
``custom_data``, not a ChunkedGraphMeta object. It prints one ``pcg_setup`` JSON line (its
argv and outcome) for tests to read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from os import environ

import yaml
from kvdbclient import BigTableClient, BigTableConfig

DATASET_PATH = environ.get("PCG_DATASET", "/app/datasets/dataset.yml")
VERSION = "pcg-stand-in"


def setup(graph_id: str, raw: bool = False, exist_ok: bool = False) -> str:
    """Create the graph (table and metadata); "created" or, with exist_ok on an existing
    table, "exists: skipped". Raises ValueError("... already exists.") otherwise."""
    from adapters.bigtable.graph_meta_store import meta_record
    from demo.setup import graph_meta

    with open(DATASET_PATH) as stream:
        config = yaml.safe_load(stream)
    client_config = BigTableConfig(**config["backend_client"]["CONFIG"])
    source = config["data_source"]
    geometry = graph_meta(
        {"data_source": {"watershed": source["WATERSHED"]}, "graph_config": config["graph_config"]}
    )
    agg = {"path": (config.get("ingest_config") or {}).get("AGGLOMERATION"), "raw": raw}
    meta = {**meta_record(geometry), "custom_data": {"agg": agg}}
    client = BigTableClient(str(graph_id), config=client_config)
    try:
        client.create_table(meta, VERSION)
    except ValueError as exc:
        if not (exist_ok and "already exists" in str(exc)):
            raise
        return "exists: skipped"
    finally:
        client.close()
    return "created"


def main() -> int:
    parser = argparse.ArgumentParser(prog="pychunkedgraph.pipeline.ingest.setup")
    parser.add_argument("graph_id")
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--exist-ok", action="store_true")
    args = parser.parse_args()
    outcome = setup(args.graph_id, raw=args.raw, exist_ok=args.exist_ok)
    print(json.dumps({"pcg_setup": {"argv": sys.argv[1:], "outcome": outcome}}), flush=True)
    return 0


if __name__ == "__main__":
    _code = 1
    try:
        _code = main()
    except BaseException:
        import traceback

        traceback.print_exc()  # as the real module's uncaught error: the pod fails
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_code)  # the Bigtable client may leave a non-daemon thread behind
