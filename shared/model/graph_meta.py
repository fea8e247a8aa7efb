"""The graph metadata a setup pass writes, as a setup pod reports it, and the controller's
check of it against its own grid. Pure module.

PyChunkedGraph keeps a graph's geometry (voxel bounds, chunk size, layer count) in its table,
written by the ingest setup, and its workers take their chunk grids from there. The demo does
the same (`demo.setup`). A setup pod that knows the metadata it left in the table prints it
as one JSON log line, ``{"graph_meta": {...}}`` (:func:`report_line`); a PyChunkedGraph image's
setup pod prints it through the graph probe (`shared.jobs.graph_probe`), which reads it with the
image's own code, per-layer chunk grids (``layer_chunk_bounds``, what the image's harness iterates)
included. After the setup Job completes, the controller reads that line from the pod's log
(:func:`parse_report`) and refuses the stage when the metadata disagrees with the grid it planned
(:func:`mismatch`), so a hand-typed `data_source.size`, a voxel offset or the image's own rounding
can never silently skip chunks or run empty pods.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.model.layers import layer_shape

REPORT_KEY = "graph_meta"

Vec = tuple[int, int, int]


class GraphMetaError(ValueError):
    """A metadata record is malformed; the message names the field."""


@dataclass(frozen=True)
class GraphMeta:
    """A graph's geometry: voxel bounds ``[lo, hi)`` at mip 0, chunk size, layer count, and
    where an image reported them, its chunk grid of each layer below the root (layer, grid)."""

    bounds_lo: Vec
    bounds_hi: Vec
    chunk_size: Vec
    layer_count: int
    layer_chunk_bounds: tuple[tuple[int, Vec], ...] = ()

    @property
    def size(self) -> Vec:
        """Volume size in voxels."""
        return tuple(h - lo for lo, h in zip(self.bounds_lo, self.bounds_hi, strict=True))  # type: ignore[return-value]

    @property
    def layer2_shape(self) -> Vec:
        """The layer-2 chunk grid the bounds cut into (ceil of size / chunk size)."""
        return tuple(-(-s // c) for s, c in zip(self.size, self.chunk_size, strict=True))  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """The record's plain form; `layer_chunk_bounds` only when reported (so this
        project's stored record is unchanged by it)."""
        out: dict[str, Any] = {
            "bounds_lo": list(self.bounds_lo),
            "bounds_hi": list(self.bounds_hi),
            "chunk_size": list(self.chunk_size),
            "layer_count": self.layer_count,
        }
        if self.layer_chunk_bounds:
            out["layer_chunk_bounds"] = {str(k): list(v) for k, v in self.layer_chunk_bounds}
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> GraphMeta:
        """Parse a record written by :meth:`to_dict`; GraphMetaError names the bad field."""
        if not isinstance(raw, dict):
            raise GraphMetaError(f"graph metadata must be a mapping, got {type(raw).__name__}")
        vecs = {key: _vec(raw.get(key), key) for key in ("bounds_lo", "bounds_hi", "chunk_size")}
        try:
            layers = int(raw["layer_count"])
        except (KeyError, TypeError, ValueError):
            raise GraphMetaError("graph metadata layer_count: missing or not an integer") from None
        grids = raw.get("layer_chunk_bounds") or {}
        if not isinstance(grids, dict):
            raise GraphMetaError("graph metadata layer_chunk_bounds: not a mapping of layers")
        by_layer = tuple(
            sorted((_layer(k), _vec(v, f"layer_chunk_bounds[{k}]")) for k, v in grids.items())
        )
        meta = cls(vecs["bounds_lo"], vecs["bounds_hi"], vecs["chunk_size"], layers, by_layer)
        if min(meta.size) < 1 or min(meta.chunk_size) < 1 or layers < 2:
            raise GraphMetaError(f"graph metadata is not a volume: {meta.to_dict()}")
        return meta


def _vec(raw: Any, key: str) -> Vec:
    """Three integers, or GraphMetaError naming `key`."""
    try:
        vec = tuple(int(v) for v in raw)
    except (TypeError, ValueError):
        raise GraphMetaError(f"graph metadata {key}: missing or not 3 integers") from None
    if len(vec) != 3:
        raise GraphMetaError(f"graph metadata {key}: {list(vec)} is not 3 integers")
    return vec  # type: ignore[return-value]


def _layer(raw: Any) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise GraphMetaError(
            f"graph metadata layer_chunk_bounds: layer {raw!r} is not an integer"
        ) from None


def report_line(meta: GraphMeta) -> str:
    """The JSON log line a setup pod prints for the controller's check."""
    return json.dumps(
        {"severity": "INFO", "message": "graph metadata", REPORT_KEY: meta.to_dict()},
        separators=(",", ":"),
    )


def parse_report(log_text: str) -> GraphMeta | None:
    """The last graph metadata reported in a setup pod's log, or None if it reports none
    (PyChunkedGraph's own setups print none). A malformed report raises GraphMetaError."""
    found: GraphMeta | None = None
    for line in log_text.splitlines():
        line = line.strip()
        if not line.startswith("{") or REPORT_KEY not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and REPORT_KEY in record:
            found = GraphMeta.from_dict(record[REPORT_KEY])
    return found


def mismatch(meta: GraphMeta, layer2_shape: Vec, layer_count: int, fanout: int = 2) -> str:
    """Why `meta` disagrees with the controller's grid (both numbers), or "" if it agrees:
    the layer-2 grid its bounds cut into, its layer count, and each layer's chunk grid the
    image reported (what its harness iterates, against the grid the layer's Job counts)."""
    problems = []
    if tuple(meta.layer2_shape) != tuple(layer2_shape):
        problems.append(
            f"layer-2 grid {list(meta.layer2_shape)} (bounds {list(meta.bounds_lo)}.."
            f"{list(meta.bounds_hi)}, chunk size {list(meta.chunk_size)}) in the graph "
            f"metadata vs {list(layer2_shape)} planned by the controller"
        )
    if meta.layer_count != layer_count:
        problems.append(
            f"layer count {meta.layer_count} in the graph metadata vs {layer_count} planned"
        )
    for layer, grid in () if problems else meta.layer_chunk_bounds:
        planned = layer_shape(layer2_shape, layer, fanout) if layer >= 2 else None
        if tuple(grid) != planned:
            problems.append(
                f"layer {layer} chunk grid {list(grid)} iterated by the image vs "
                f"{list(planned) if planned else 'none'} planned"
            )
    if not problems:
        return ""
    return (
        "; ".join(problems) + ": the graph's table was set up for another grid. Fix "
        "data_source.size (or drop it to read the watershed's info file) or set the graph up "
        "again, then start a new run"
    )
