"""The completeness check's ledger read against the Bigtable emulator: key-range scans that
return only done markers, told apart by stage, compared with the planned grid."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from adapters.bigtable.ledger_scan import done_chunk_ids, key_ranges
from shared.reconcile.completeness import LayerGrid, verify_layer
from tests.builders.done_rows import write_claims, write_done_markers

L2 = LayerGrid("ingest", 2, (8, 8, 8), 5, 10)
L3 = LayerGrid("ingest", 3, (4, 4, 4), 5, 10)
MISSING = [0, 77, 511]  # flat positions of layer 2 without a done marker


@pytest.fixture
def ledger(bigtable_table: tuple[Any, str]) -> Any:
    client, _ = bigtable_table
    l2 = [L2.chunk_id(p) for p in range(L2.chunks) if p not in MISSING]
    write_done_markers(client, l2 + [L3.chunk_id(p) for p in range(L3.chunks)])
    # The missing chunks: claimed but never finished, and done in another stage only.
    gone = [L2.chunk_id(p) for p in MISSING]
    write_claims(client, gone)
    write_done_markers(client, gone, stage="meshing")
    return client


def test_a_scan_finds_every_done_marker_and_nothing_else(ledger):
    ids = done_chunk_ids(ledger, "ingest")
    assert ids.dtype == np.uint64 and ids.size == L2.chunks - len(MISSING) + L3.chunks
    v2 = verify_layer(L2, ids)
    assert (v2.chunks_marked, v2.chunks_expected) == (509, 512)
    assert v2.missing_ranges == "0,77,511"
    assert [m.coord for m in v2.examples] == [(0, 0, 0), (1, 1, 5), (7, 7, 7)]
    assert [m.chunk_id for m in v2.examples] == [L2.chunk_id(p) for p in MISSING]
    assert verify_layer(L3, ids).complete
    meshing = done_chunk_ids(ledger, "meshing")
    assert sorted(meshing.tolist()) == sorted(L2.chunk_id(p) for p in MISSING)


@pytest.mark.parametrize("shards", [1, 3, 16])
def test_the_key_ranges_cover_the_table(ledger, shards):
    assert len(key_ranges(shards)) == shards
    assert done_chunk_ids(ledger, "ingest", shards).size == 509 + 64
