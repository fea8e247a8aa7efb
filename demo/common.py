"""What the demo workloads share: the dataset's geometry, the volume, chunk boxes, and the
per-label connected components of a chunk (the same numbering in every pass, so l2cache and
meshing can match the nodes ingest made)."""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from demo.volume import load_volume
from worker.errors import FatalChunkError

Vec = tuple[int, int, int]


def geometry(dataset: dict[str, Any]) -> tuple[Vec, Vec, int]:
    """Volume size, chunk size and spatial bits from the dataset config (fatal if absent)."""
    try:
        size = tuple(int(v) for v in dataset["data_source"]["size"])
        chunk = tuple(int(v) for v in dataset["graph_config"]["CHUNK_SIZE"])
        bits = int(dataset["graph_config"].get("SPATIAL_BITS", 10))
    except (KeyError, TypeError, ValueError) as exc:
        raise FatalChunkError(
            f"dataset needs data_source.size and graph_config.CHUNK_SIZE: {exc!r}"
        ) from exc
    if len(size) != 3 or len(chunk) != 3 or min(size) < 1 or min(chunk) < 1:
        raise FatalChunkError(f"bad dataset geometry: size {size}, CHUNK_SIZE {chunk}")
    return size, chunk, bits  # type: ignore[return-value]


def chunk_bounds(layer: int, coord: Vec, chunk_size: Vec, size: Vec) -> tuple[Vec, Vec]:
    """Voxel box ``[lo, hi)`` of chunk ``coord`` at ``layer``, clipped to the volume."""
    scale = 2 ** (layer - 2)
    lo = tuple(int(c) * s * scale for c, s in zip(coord, chunk_size, strict=True))
    if any(a >= n or a < 0 for a, n in zip(lo, size, strict=True)):
        raise FatalChunkError(f"chunk {layer}_{tuple(coord)} lies outside the volume {size}")
    hi = tuple(min(a + s * scale, n) for a, s, n in zip(lo, chunk_size, size, strict=True))
    return lo, hi  # type: ignore[return-value]


@functools.lru_cache(maxsize=2)
def volume(path: str) -> np.ndarray:
    """The volume at `path`, memory-mapped once per process (fatal if unreadable)."""
    if not path:
        raise FatalChunkError("dataset data_source.watershed is empty: no volume to ingest")
    if not os.path.isfile(path):
        raise FatalChunkError(f"volume file {path} (data_source.watershed) not found")
    try:
        return load_volume(path)
    except (OSError, ValueError) as exc:
        raise FatalChunkError(f"volume file {path} is not a readable .npy volume: {exc}") from exc


def label_chunk(sub: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The components of a chunk's voxels (per label, 6-connectivity), in canonical order.

    Returns ``(comp, labels, voxels)``: ``comp`` numbers the components ``1..n`` (0 =
    background) label by label, each label's in raster order of their first voxel; ``labels``
    and ``voxels`` give each component's label and voxel count (index ``comp - 1``).
    """
    from scipy import ndimage  # a layer-2 pass only: keep it out of start-up

    comp = np.zeros(sub.shape, dtype=np.int64)
    labels: list[int] = []
    for lab in np.unique(sub):
        if lab == 0:
            continue
        lab_comp, n = ndimage.label(sub == lab)  # default structure: 6-connectivity
        fg = lab_comp > 0
        comp[fg] = lab_comp[fg] + len(labels)
        labels += [int(lab)] * n
    voxels = np.bincount(comp.ravel(), minlength=len(labels) + 1)[1:]
    return comp, np.array(labels, dtype=np.int64), voxels.astype(np.int64)


def layer2_volume(dataset: dict[str, Any], coord: Vec) -> tuple[np.ndarray, Vec, Vec, Vec, int]:
    """The volume and the box of layer-2 chunk ``coord``: ``(vol, lo, hi, size, bits)``."""
    size, chunk_size, bits = geometry(dataset)
    lo, hi = chunk_bounds(2, coord, chunk_size, size)
    vol = volume(str(dataset["data_source"].get("watershed", "")))
    if tuple(vol.shape) != tuple(size):
        raise FatalChunkError(f"volume shape {vol.shape} differs from data_source.size {size}")
    return vol, lo, hi, size, bits
