"""The demo's oracle: the built graph against a direct whole-volume computation.

``expected_stats`` labels the volume directly (``scipy.ndimage.label``, per label,
6-connectivity): at each layer, the number of components of every chunk region (summed over
the layer's chunks), and at the root the multiset of (label, voxel count) of the volume's
components. ``observed_stats`` summarises the node rows in the table: nodes per layer (every
row, orphans included), the root nodes' (label, voxel count) multiset, and the nodes below the
root without a parent. ``compare`` lists every disagreement in words.

A chunk built twice leaves extra nodes; a skipped chunk leaves too few nodes and wrong voxel
counts above it; a layer started before the one below finished merges incomplete children
(wrong counts, parentless nodes). Each makes ``compare`` fail.

Pure: numpy and scipy, no I/O (the rows are read by ``demo.graph_table``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import ndimage

from shared.model.layers import layer_count

__all__ = ["OracleResult", "compare", "expected_stats", "observed_stats", "region_components"]

_MAX_LISTED = 5


class _Node(Protocol):
    node_id: int
    label: int
    voxels: int
    parent: int | None


def _components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    return ndimage.label(mask)  # default structure: 6-connectivity in 3-D


def region_components(
    volume: np.ndarray, chunk_size: tuple[int, int, int], layer: int
) -> Iterator[tuple[tuple[int, int, int], Counter[tuple[int, int]]]]:
    """Every chunk region of ``layer`` (edge ``chunk_size * 2**(layer - 2)``, clipped to the
    volume) as ``(coord, Counter of (label, voxels))``: its components, one per node the
    layer's chunk should hold."""
    vol = np.asarray(volume)
    edge = [c * 2 ** (layer - 2) for c in chunk_size]
    for x in range(0, vol.shape[0], edge[0]):
        for y in range(0, vol.shape[1], edge[1]):
            for z in range(0, vol.shape[2], edge[2]):
                sub = vol[x : x + edge[0], y : y + edge[1], z : z + edge[2]]
                found: Counter[tuple[int, int]] = Counter()
                for lab in np.unique(sub):
                    if lab:
                        comp, n = _components(sub == lab)
                        sizes = np.bincount(comp.ravel(), minlength=n + 1)[1:]
                        found.update((int(lab), int(v)) for v in sizes)
                yield (x // edge[0], y // edge[1], z // edge[2]), found


def expected_stats(
    volume: np.ndarray, chunk_size: tuple[int, int, int], n_layers: int | None = None
) -> dict[str, Any]:
    """Counts computed directly from ``volume`` (uint labels, 0 = background).

    Returns ``{"n_layers", "nodes_per_layer": {layer: count}, "root_components": [(label,
    voxels), ...] sorted}``. ``n_layers`` defaults to the layer count of the chunk grid.
    """
    vol = np.asarray(volume)
    size = vol.shape
    l2_shape = tuple(-(-s // c) for s, c in zip(size, chunk_size, strict=True))
    if n_layers is None:
        n_layers = layer_count(l2_shape)  # type: ignore[arg-type]
    labels = [int(v) for v in np.unique(vol) if v != 0]
    per_layer = {
        layer: sum(sum(c.values()) for _, c in region_components(vol, chunk_size, layer))
        for layer in range(2, n_layers + 1)
    }
    roots: list[tuple[int, int]] = []
    for lab in labels:
        comp, n = _components(vol == lab)
        roots += [(lab, int(v)) for v in np.bincount(comp.ravel(), minlength=n + 1)[1:]]
    return {"n_layers": n_layers, "nodes_per_layer": per_layer, "root_components": sorted(roots)}


def observed_stats(nodes: Iterable[_Node], n_layers: int) -> dict[str, Any]:
    """Summary of the node rows read from the table (every row: orphans count too).

    Returns ``{"n_layers", "nodes_per_layer", "root_components", "parentless",
    "dangling_parents"}``: parentless = nodes below the root without a ``parents`` cell;
    dangling = parents that name no node row.
    """
    nodes = list(nodes)
    ids = {int(n.node_id) for n in nodes}
    per_layer: Counter[int] = Counter()
    roots: list[tuple[int, int]] = []
    parentless = dangling = 0
    for n in nodes:
        layer = int(n.node_id) >> 56
        per_layer[layer] += 1
        if layer >= n_layers:
            roots.append((int(n.label), int(n.voxels)))
        elif n.parent is None:
            parentless += 1
        elif int(n.parent) not in ids:
            dangling += 1
    return {
        "n_layers": n_layers,
        "nodes_per_layer": dict(sorted(per_layer.items())),
        "root_components": sorted(roots),
        "parentless": parentless,
        "dangling_parents": dangling,
    }


@dataclass
class OracleResult:
    """``ok`` iff the table matches the direct computation; ``mismatches`` says how not."""

    ok: bool
    mismatches: list[str] = field(default_factory=list)
    expected_nodes: dict[int, int] = field(default_factory=dict)
    observed_nodes: dict[int, int] = field(default_factory=dict)
    expected_roots: int = 0
    observed_roots: int = 0
    parentless: int = 0

    def summary(self) -> str:
        if self.ok:
            total = sum(self.observed_nodes.values())
            return f"oracle OK: {total} nodes, {self.observed_roots} root components"
        return "oracle FAILED:\n  " + "\n  ".join(self.mismatches)


def _listed(items: Counter[tuple[int, int]]) -> str:
    flat = sorted(items.elements())
    more = f" and {len(flat) - _MAX_LISTED} more" if len(flat) > _MAX_LISTED else ""
    return ", ".join(f"label {lab}: {vox} voxels" for lab, vox in flat[:_MAX_LISTED]) + more


def compare(expected: dict[str, Any], observed: dict[str, Any]) -> OracleResult:
    """Every disagreement between :func:`expected_stats` and :func:`observed_stats`."""
    problems: list[str] = []
    exp_nodes = {int(k): int(v) for k, v in expected["nodes_per_layer"].items()}
    obs_nodes = {int(k): int(v) for k, v in observed["nodes_per_layer"].items()}
    for layer in sorted(set(exp_nodes) | set(obs_nodes)):
        want, got = exp_nodes.get(layer, 0), obs_nodes.get(layer, 0)
        if got > want:
            problems.append(
                f"layer {layer}: {got} nodes, expected {want} (+{got - want}: a chunk built "
                "twice, or merged from duplicated children)"
            )
        elif got < want:
            problems.append(
                f"layer {layer}: {got} nodes, expected {want} (-{want - got}: a chunk skipped, "
                "or built before the layer below finished)"
            )
    exp_roots = Counter(tuple(r) for r in expected["root_components"])
    obs_roots = Counter(tuple(r) for r in observed["root_components"])
    if exp_roots != obs_roots:
        missing, extra = exp_roots - obs_roots, obs_roots - exp_roots
        text = f"root components differ from the volume's ({sum(exp_roots.values())} expected)"
        if missing:
            text += f"; missing {_listed(missing)}"
        if extra:
            text += f"; unexpected {_listed(extra)}"
        problems.append(text)
    parentless = int(observed.get("parentless", 0))
    if parentless:
        problems.append(
            f"{parentless} nodes below the root have no parent (orphans of a chunk built twice, "
            "or a layer not built)"
        )
    if observed.get("dangling_parents", 0):
        problems.append(f"{observed['dangling_parents']} nodes name a parent that does not exist")
    return OracleResult(
        ok=not problems,
        mismatches=problems,
        expected_nodes=exp_nodes,
        observed_nodes=obs_nodes,
        expected_roots=sum(exp_roots.values()),
        observed_roots=sum(obs_roots.values()),
        parentless=parentless,
    )
