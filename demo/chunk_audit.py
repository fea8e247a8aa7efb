"""The demo ingest audited chunk by chunk from its table: what the chaos verdict counts.

Every chunk region of every layer holds, by the volume alone (``demo.oracle``'s
``region_components``, scipy labelling), one component per (label, voxel count); the graph
table must hold exactly one node for each, in that chunk's id range, and every node below the
root must name a parent that exists. Per chunk, against its node rows:

- *missing*: expected components with no node (a chunk not built, or built short);
- *extra*: nodes matching no expected component: a duplicate of one (a chunk built twice,
  or rows a dead attempt left behind), or a wrong one (merged from duplicated children);
- *orphans*: nodes below the root without a parent, or naming one that does not exist
  (a dead attempt's rows that the layer above never saw).

A chunk is *lost* when something is missing and nothing is extra or orphaned; it is
*processed twice where unsafe* when anything is extra or orphaned. A chunk whose only fault is
missing or wrong nodes while one of its child chunks has a finding is *inherited*: its
attempts merged what they found (the layer above a lost or doubled chunk is wrong too) and
it counts as neither, so each finding is counted once, where it was made. Node rows outside every
chunk of the grid count against the chunk id they carry. This reads neither the ledger nor
the workers' records, nor the grid code the workers use.

Pure: numpy and scipy, no I/O (the rows are read by ``demo.graph_table.read_all_nodes``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from demo.oracle import region_components
from shared.model.layers import chunk_coord

__all__ = ["ChunkFinding", "audit_ingest"]

Coord = tuple[int, int, int]


class _Node(Protocol):
    node_id: int
    label: int
    voxels: int
    parent: int | None


@dataclass(frozen=True)
class ChunkFinding:
    """One chunk whose node rows disagree with the volume."""

    layer: int
    coord: Coord
    missing: int = 0
    extra: int = 0
    orphans: int = 0
    duplicates: tuple[tuple[int, int], ...] = ()  # (label, voxels) held more than once
    wrong: int = 0  # nodes whose (label, voxels) is no component of the chunk at all
    inherited: bool = False  # only wrong or missing nodes, and a child chunk has a finding

    @property
    def own(self) -> bool:
        """Rows this chunk's own attempts got wrong (not merely merged from a bad child)."""
        return bool(self.duplicates or self.orphans) or not self.inherited

    @property
    def unsafe(self) -> bool:
        """Rows that should not be there: processed twice where unsafe."""
        return self.own and (self.extra > 0 or self.orphans > 0)

    @property
    def lost(self) -> bool:
        """Rows missing and nothing extra: a chunk (partly) never built."""
        return self.own and self.missing > 0 and not (self.extra or self.orphans)

    @property
    def key(self) -> str:
        return f"{self.layer}_{self.coord}"

    def describe(self) -> str:
        """The finding in words."""
        parts = ["inherited from a child chunk"] if not self.own else []
        if self.missing:
            parts.append(f"{self.missing} components missing")
        if self.duplicates:
            dup = ", ".join(f"label {lab} ({vox} voxels)" for lab, vox in self.duplicates[:3])
            parts.append(f"duplicated: {dup}")
        if self.wrong:
            parts.append(f"{self.wrong} nodes match no component")
        if self.orphans:
            parts.append(f"{self.orphans} nodes without a (live) parent")
        return f"chunk {self.key}: " + "; ".join(parts)


def audit_ingest(
    volume: np.ndarray,
    chunk_size: Coord,
    n_layers: int,
    spatial_bits: int,
    nodes: Iterable[_Node],
) -> list[ChunkFinding]:
    """Every chunk (of layers 2..``n_layers``) whose node rows disagree with ``volume``,
    in (layer, coord) order; empty when the table is exactly right."""
    nodes = list(nodes)
    ids = {int(n.node_id) for n in nodes}
    held: dict[tuple[int, Coord], Counter[tuple[int, int]]] = defaultdict(Counter)
    orphans: Counter[tuple[int, Coord]] = Counter()
    for n in nodes:
        layer, _, coord = chunk_coord(int(n.node_id), n_layers, spatial_bits)
        key = (layer, tuple(int(c) for c in coord))
        held[key][(int(n.label), int(n.voxels))] += 1
        if layer < n_layers and (n.parent is None or int(n.parent) not in ids):
            orphans[key] += 1
    expected = {
        (layer, coord): found
        for layer in range(2, n_layers + 1)
        for coord, found in region_components(volume, chunk_size, layer)
        if found
    }
    findings = []
    for key in sorted(set(expected) | set(held)):
        want, got = expected.get(key, Counter()), held.get(key, Counter())
        missing, extra = want - got, got - want
        dups = tuple(sorted(c for c in extra if c in want))
        if missing or extra or orphans[key]:
            findings.append(
                ChunkFinding(
                    key[0],
                    key[1],
                    sum(missing.values()),
                    sum(extra.values()),
                    orphans[key],
                    dups,
                    sum(v for c, v in extra.items() if c not in want),
                )
            )
    bad = {(f.layer, f.coord) for f in findings}
    return [
        replace(f, inherited=any((f.layer - 1, c) in bad for c in _children(f.coord)))
        if f.layer > 2
        else f
        for f in findings
    ]


def _children(coord: Coord) -> list[Coord]:
    x, y, z = coord
    return [(2 * x + dx, 2 * y + dy, 2 * z + dz) for dx in (0, 1) for dy in (0, 1) for dz in (0, 1)]
