"""The graph metadata a setup pass writes, as a setup pod reports it, and the controller's
check of it against its own grid. Pure module.

PyChunkedGraph keeps a graph's geometry (voxel bounds, chunk size, layer count) in its table,
written by the ingest setup, and its workers take their chunk grids from there. The demo does
the same (`demo.setup`). A setup pod that knows the metadata it left in the table prints it
as one JSON log line, ``{"graph_meta": {...}}`` (:func:`report_line`); after the setup Job
completes, the controller reads that line from the pod's log (:func:`parse_report`) and
refuses the stage when the metadata disagrees with the grid it planned (:func:`mismatch`), so
a hand-typed `data_source.size` can never silently skip chunks or run empty pods.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

REPORT_KEY = "graph_meta"

Vec = tuple[int, int, int]


class GraphMetaError(ValueError):
    """A metadata record is malformed; the message names the field."""


@dataclass(frozen=True)
class GraphMeta:
    """A graph's geometry: voxel bounds ``[lo, hi)`` at mip 0, chunk size, layer count."""

    bounds_lo: Vec
    bounds_hi: Vec
    chunk_size: Vec
    layer_count: int

    @property
    def size(self) -> Vec:
        """Volume size in voxels."""
        return tuple(h - lo for lo, h in zip(self.bounds_lo, self.bounds_hi, strict=True))  # type: ignore[return-value]

    @property
    def layer2_shape(self) -> Vec:
        """The layer-2 chunk grid the bounds cut into (ceil of size / chunk size)."""
        return tuple(-(-s // c) for s, c in zip(self.size, self.chunk_size, strict=True))  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, raw: Any) -> GraphMeta:
        """Parse a record written by :meth:`to_dict`; GraphMetaError names the bad field."""
        if not isinstance(raw, dict):
            raise GraphMetaError(f"graph metadata must be a mapping, got {type(raw).__name__}")
        vecs: dict[str, Vec] = {}
        for key in ("bounds_lo", "bounds_hi", "chunk_size"):
            try:
                vec = tuple(int(v) for v in raw[key])
            except (KeyError, TypeError, ValueError):
                raise GraphMetaError(f"graph metadata {key}: missing or not 3 integers") from None
            if len(vec) != 3:
                raise GraphMetaError(f"graph metadata {key}: {list(vec)} is not 3 integers")
            vecs[key] = vec  # type: ignore[assignment]
        try:
            layers = int(raw["layer_count"])
        except (KeyError, TypeError, ValueError):
            raise GraphMetaError("graph metadata layer_count: missing or not an integer") from None
        meta = cls(vecs["bounds_lo"], vecs["bounds_hi"], vecs["chunk_size"], layers)
        if min(meta.size) < 1 or min(meta.chunk_size) < 1 or layers < 2:
            raise GraphMetaError(f"graph metadata is not a volume: {meta.to_dict()}")
        return meta


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


def mismatch(meta: GraphMeta, layer2_shape: Vec, layer_count: int) -> str:
    """Why `meta` disagrees with the controller's grid (both numbers), or "" if it agrees."""
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
    if not problems:
        return ""
    return (
        "; ".join(problems) + ": the graph's table was set up for another grid. Fix "
        "data_source.size (or drop it to read the watershed's info file) or set the graph up "
        "again, then start a new run"
    )
