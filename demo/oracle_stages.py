"""The demo's l2cache and meshing oracles: the pass's rows against the volume, directly.

Both work chunk by chunk: for every chunk of a layer, the volume's components in the chunk box
(``scipy.ndimage.label`` per label, 6-connectivity) are computed directly and compared, as a
multiset per chunk, with what the pass stored for the graph's nodes of that chunk (the node's
chunk comes from its id). The direct computation shares no code with the workloads: masks per
component here, label arrays and stitching there.

- l2cache: each L2 node's cached (label, voxels, bounding box) and centroid (to 1e-6) must
  equal one component of its chunk; every L2 node needs a row whose label and voxel count
  agree with the graph's; no row may name a node the graph does not have.
- meshing: at every meshed layer (2..top, the root if meshed to it), each node's exposed
  faces, with its label and voxel count, must equal a component's: faces towards anything not
  of the component, the chunk box's (at the root, the volume's) boundary counting as exposed.
  A node stitched without some children's meshes is reported as such.

Pure: numpy and scipy, no I/O. Results are :class:`StageOracleResult`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import ndimage

from shared.model.layers import chunk_coord

__all__ = [
    "StageOracleResult",
    "check_l2cache",
    "check_meshing",
    "expected_l2cache",
    "expected_meshes",
    "surface_faces",
]

_MAX_LISTED = 5
Vec = tuple[int, int, int]


class _Node(Protocol):
    node_id: int
    label: int
    voxels: int


@dataclass
class StageOracleResult:
    """``ok`` iff the pass's rows match the volume; ``mismatches`` say how not."""

    stage: str
    ok: bool
    mismatches: list[str] = field(default_factory=list)
    checked: int = 0  # nodes compared
    layers: list[int] = field(default_factory=list)

    def summary(self) -> str:
        if self.ok:
            where = f" at layers {self.layers}" if len(self.layers) > 1 else ""
            return f"{self.stage} oracle OK: {self.checked} nodes{where}"
        return f"{self.stage} oracle FAILED:\n  " + "\n  ".join(self.mismatches)

    def to_dict(self, limit: int = 20) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "layers": self.layers,
            "mismatches": self.mismatches[:limit],
        }


# ------------------------------------------------------------------------------ direct


def surface_faces(mask: np.ndarray) -> int:
    """Exposed faces of the voxels of ``mask``: faces towards a voxel not in it, the array's
    boundary counting as exposed."""
    padded = np.pad(np.asarray(mask, dtype=np.int8), 1)
    return int(sum(np.count_nonzero(np.diff(padded, axis=a)) for a in range(padded.ndim)))


def _chunks(vol: np.ndarray, chunk_size: Vec, layer: int) -> Iterator[tuple[Vec, Vec, list]]:
    """``(coord, lo, [(label, mask), ...])`` for every chunk of ``layer`` and each of its
    components (masks are in chunk-box coordinates)."""
    edge = [c * 2 ** (layer - 2) for c in chunk_size]
    size = vol.shape
    for x in range(0, size[0], edge[0]):
        for y in range(0, size[1], edge[1]):
            for z in range(0, size[2], edge[2]):
                sub = vol[x : x + edge[0], y : y + edge[1], z : z + edge[2]]
                comps = []
                for lab in np.unique(sub):
                    if lab:
                        lab_comp, n = ndimage.label(sub == lab)
                        comps += [(int(lab), lab_comp == j) for j in range(1, n + 1)]
                coord = (x // edge[0], y // edge[1], z // edge[2])
                yield coord, (x, y, z), comps


def expected_l2cache(volume: np.ndarray, chunk_size: Vec) -> dict[Vec, list[tuple]]:
    """Per layer-2 chunk: ``(label, voxels, bbox_lo, bbox_hi, centroid)`` of its components."""
    vol = np.asarray(volume)
    out: dict[Vec, list[tuple]] = {}
    for coord, lo, comps in _chunks(vol, chunk_size, 2):
        rows = []
        for lab, mask in comps:
            idx = np.nonzero(mask)
            box_lo = tuple(int(i.min()) + a for i, a in zip(idx, lo, strict=True))
            box_hi = tuple(int(i.max()) + 1 + a for i, a in zip(idx, lo, strict=True))
            com = ndimage.center_of_mass(mask)
            centroid = tuple(float(c) + a for c, a in zip(com, lo, strict=True))
            rows.append((lab, int(len(idx[0])), box_lo, box_hi, centroid))
        out[coord] = rows
    return out


def expected_meshes(volume: np.ndarray, chunk_size: Vec, layer: int) -> dict[Vec, list[tuple]]:
    """Per chunk of ``layer``: ``(label, voxels, exposed faces)`` of its components."""
    vol = np.asarray(volume)
    return {
        coord: [(lab, int(np.count_nonzero(m)), surface_faces(m)) for lab, m in comps]
        for coord, _lo, comps in _chunks(vol, chunk_size, layer)
    }


# ------------------------------------------------------------------------------ compare


def _layer_of(node_id: int) -> int:
    return int(node_id) >> 56


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else ""
    return "; ".join(items[:_MAX_LISTED]) + more


def _describe_l2(key: tuple) -> str:
    lab, vox, lo, hi = key
    return f"label {lab}, {vox} voxels, bbox {list(lo)}-{list(hi)}"


def _compare_chunks(
    stage: str,
    layer: int,
    expected: Mapping[Vec, list[tuple]],
    observed: Mapping[Vec, list[tuple[tuple, int]]],
    describe: Any,
) -> list[str]:
    """Per chunk, the multiset of keys expected vs observed (with the node ids)."""
    problems = []
    for coord in sorted(set(expected) | set(observed)):
        want = Counter(expected.get(coord, []))
        got_nodes: dict[tuple, list[int]] = defaultdict(list)
        for key, node in observed.get(coord, []):
            got_nodes[key].append(node)
        got = Counter({k: len(v) for k, v in got_nodes.items()})
        if want == got:
            continue
        text = f"{stage} chunk {layer}_{coord}:"
        missing, extra = want - got, got - want
        if extra:
            items = [
                f"{describe(k)} (node {', '.join(map(str, got_nodes[k][:2]))})"
                for k in sorted(extra)
            ]
            text += f" stored but not in the volume: {_listed(items)};"
        if missing:
            text += (
                f" in the volume but not stored: {_listed([describe(k) for k in sorted(missing)])}"
            )
        problems.append(text.rstrip(";"))
    return problems


def check_l2cache(
    volume: np.ndarray,
    chunk_size: Vec,
    nodes: Iterable[_Node],
    cache: Mapping[int, Any],
    n_layers: int,
    spatial_bits: int = 10,
) -> StageOracleResult:
    """The cache rows (node id -> ``L2CacheRecord``) of the graph's L2 ``nodes`` against
    :func:`expected_l2cache`."""
    l2 = [n for n in nodes if _layer_of(n.node_id) == 2]
    l2_ids = {int(n.node_id) for n in l2}
    problems: list[str] = []
    no_row = [n for n in l2 if int(n.node_id) not in cache]
    if no_row:
        items = [
            f"node {n.node_id} (chunk 2_{_coord(n.node_id, n_layers, spatial_bits)})"
            for n in no_row
        ]
        problems.append(
            f"l2cache: {len(no_row)} of {len(l2)} L2 nodes have no cache row "
            f"(a chunk skipped?): {_listed(items)}"
        )
    disagree = [
        f"node {n.node_id}: cached label {cache[n.node_id].label} / {cache[n.node_id].voxels} "
        f"voxels, graph label {n.label} / {n.voxels} voxels"
        for n in l2
        if n.node_id in cache
        and (cache[n.node_id].label, cache[n.node_id].voxels) != (n.label, n.voxels)
    ]
    if disagree:
        problems.append(
            f"l2cache: {len(disagree)} cache rows disagree with the graph: {_listed(disagree)}"
        )
    stray = sorted(set(cache) - l2_ids)
    if stray:
        problems.append(
            f"l2cache: {len(stray)} cache rows name no L2 node of the graph: "
            f"{_listed([str(s) for s in stray])}"
        )
    expected = expected_l2cache(volume, chunk_size)
    observed: dict[Vec, list[tuple[tuple, int]]] = defaultdict(list)
    centroids: dict[tuple[Vec, tuple], list[tuple[tuple, int]]] = defaultdict(list)
    for n in l2:
        rec = cache.get(n.node_id)
        if rec is None:
            continue
        coord = _coord(n.node_id, n_layers, spatial_bits)
        key = (rec.label, rec.voxels, tuple(rec.bbox_lo), tuple(rec.bbox_hi))
        observed[coord].append((key, int(n.node_id)))
        centroids[(coord, key)].append((tuple(rec.centroid), int(n.node_id)))
    keyed = {c: [r[:4] for r in rows] for c, rows in expected.items()}
    problems += _compare_chunks("l2cache", 2, keyed, observed, _describe_l2)
    for coord, rows in expected.items():  # centroids of the keys that do match
        by_key: dict[tuple, list[tuple]] = defaultdict(list)
        for r in rows:
            by_key[r[:4]].append(r[4])
        for key, want in by_key.items():
            got = centroids.get((coord, key), [])
            if len(got) != len(want):
                continue  # already reported as a multiset difference
            for w, (g, node) in zip(sorted(want), sorted(got), strict=True):
                if not np.allclose(w, g, rtol=0, atol=1e-6):
                    problems.append(
                        f"l2cache chunk 2_{coord}: node {node} ({_describe_l2(key)}): centroid "
                        f"{_fmt(g)} cached, {_fmt(w)} from the volume"
                    )
    return StageOracleResult("l2cache", not problems, problems, len(l2), [2])


def check_meshing(
    volume: np.ndarray,
    chunk_size: Vec,
    nodes: Iterable[_Node],
    meshes: Mapping[int, Any],
    n_layers: int,
    top_layer: int,
    spatial_bits: int = 10,
    layers: Iterable[int] | None = None,
) -> StageOracleResult:
    """The mesh rows (node id -> ``MeshRecord``) of the graph's nodes at ``layers`` (default:
    every meshed layer, 2..``top_layer``) against :func:`expected_meshes`."""
    nodes = list(nodes)
    check = sorted(set(layers) if layers is not None else set(range(2, top_layer + 1)))
    problems: list[str] = []
    checked = 0
    for layer in check:
        mine = [n for n in nodes if _layer_of(n.node_id) == layer]
        checked += len(mine)
        no_row = [n for n in mine if int(n.node_id) not in meshes]
        if no_row:
            items = [
                f"node {n.node_id} (chunk {layer}_{_coord(n.node_id, n_layers, spatial_bits)})"
                for n in no_row
            ]
            problems.append(
                f"meshing layer {layer}: {len(no_row)} of {len(mine)} nodes have no "
                f"mesh (a chunk skipped?): {_listed(items)}"
            )
        partial = [n for n in mine if getattr(meshes.get(n.node_id), "missing", 0)]
        if partial:
            items = [f"node {n.node_id} lacked {meshes[n.node_id].missing}" for n in partial]
            problems.append(
                f"meshing layer {layer}: {len(partial)} nodes were stitched without some "
                f"children's meshes (layer {layer} started before layer {layer - 1} was "
                f"complete?): {_listed(items)}"
            )
        observed: dict[Vec, list[tuple[tuple, int]]] = defaultdict(list)
        for n in mine:
            rec = meshes.get(n.node_id)
            if rec is not None:
                coord = _coord(n.node_id, n_layers, spatial_bits)
                observed[coord].append(((int(n.label), int(n.voxels), int(rec.faces)), n.node_id))
        expected = expected_meshes(volume, chunk_size, layer)
        problems += _compare_chunks(
            "meshing",
            layer,
            expected,
            observed,
            lambda k: f"label {k[0]}, {k[1]} voxels, {k[2]} faces",
        )
    return StageOracleResult("meshing", not problems, problems, checked, check)


def _coord(node_id: int, n_layers: int, spatial_bits: int) -> Vec:
    return tuple(int(v) for v in chunk_coord(int(node_id), n_layers, spatial_bits)[2])  # type: ignore[return-value]


def _fmt(v: tuple) -> str:
    return "(" + ", ".join(f"{x:.4f}" for x in v) + ")"
