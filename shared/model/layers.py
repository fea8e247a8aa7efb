"""Layer maths of a chunked graph: layer count, per-layer grid shape, chunk ids.

Chunk ids follow PyChunkedGraph: the layer in the top 8 bits, then x, y, z with a per-layer
bit width (`bits_per_dim`), so ids sort by layer and a chunk's nodes share a key prefix.
"""

from __future__ import annotations

import math

LAYER_ID_BITS = 8


def layer_count(layer2_shape: tuple[int, int, int], fanout: int = 2) -> int:
    """Number of layers (the root layer) for a layer-2 grid: PyChunkedGraph's formula."""
    longest, levels = max(layer2_shape), 0
    while fanout**levels < longest:  # integer ceil(log_fanout(longest)); floats round wrong
        levels += 1
    return levels + 2


def layer2_shape_of(size: tuple[int, ...], chunk_size: tuple[int, ...]) -> tuple[int, int, int]:
    """Layer-2 grid of a volume: its size in voxels cut into CHUNK_SIZE chunks (rounded up)."""
    return tuple(math.ceil(s / c) for s, c in zip(size, chunk_size, strict=True))  # type: ignore[return-value]


def layer_shape(
    layer2_shape: tuple[int, int, int], layer: int, fanout: int = 2
) -> tuple[int, int, int]:
    """Grid shape at `layer`: each layer merges fanout**3 blocks of the layer below."""
    if layer < 2:
        raise ValueError(f"layer {layer} has no chunk grid: layers start at 2")
    scale = fanout ** (layer - 2)
    return tuple(math.ceil(s / scale) for s in layer2_shape)  # type: ignore[return-value]


def bits_per_dim(n_layers: int, layer: int, spatial_bits: int) -> int:
    """Bits per coordinate in a chunk id at `layer` (PyChunkedGraph's compute_bitmasks)."""
    layer = max(layer, 2)
    bits = max(1, n_layers - layer)
    if layer == 2:
        if spatial_bits < bits:
            raise ValueError(f"{spatial_bits} spatial bits cannot encode {n_layers} layers")
        bits = max(spatial_bits, bits)
    return bits


def chunk_id(layer: int, coord: tuple[int, int, int], n_layers: int, spatial_bits: int) -> int:
    """The 64-bit chunk id of chunk `coord` at `layer`."""
    bits = bits_per_dim(n_layers, layer, spatial_bits)
    x, y, z = (int(c) for c in coord)
    if max(x, y, z) >= 1 << bits or min(x, y, z) < 0:
        raise ValueError(f"chunk {coord} does not fit {bits} bits per dimension at layer {layer}")
    offset = 64 - LAYER_ID_BITS
    return (
        (layer << offset)
        | (x << (offset - bits))
        | (y << (offset - 2 * bits))
        | (z << (offset - 3 * bits))
    )


def chunk_coord(
    cid: int, n_layers: int, spatial_bits: int
) -> tuple[int, int, tuple[int, int, int]]:
    """Inverse of chunk_id: (layer, bits, (x, y, z))."""
    offset = 64 - LAYER_ID_BITS
    layer = cid >> offset
    bits = bits_per_dim(n_layers, layer, spatial_bits)
    mask = (1 << bits) - 1
    return (
        layer,
        bits,
        (
            (cid >> (offset - bits)) & mask,
            (cid >> (offset - 2 * bits)) & mask,
            (cid >> (offset - 3 * bits)) & mask,
        ),
    )


def segment_bits(n_layers: int, layer: int, spatial_bits: int) -> int:
    """Bits left below the chunk id for segment (node) ids within a chunk."""
    return 64 - LAYER_ID_BITS - 3 * bits_per_dim(n_layers, layer, spatial_bits)


def children(coord: tuple[int, int, int], child_shape: tuple[int, int, int], fanout: int = 2):
    """Coordinates of the child chunks (one layer down) of a chunk, clipped to the grid."""
    x, y, z = coord
    for dx in range(fanout):
        for dy in range(fanout):
            for dz in range(fanout):
                c = (x * fanout + dx, y * fanout + dy, z * fanout + dz)
                if all(ci < si for ci, si in zip(c, child_shape, strict=True)):
                    yield c
