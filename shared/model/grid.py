"""Chunk distribution: which chunks batch ``i`` of a layer's Indexed Job processes.

A layer's chunks form an ``X*Y*Z`` grid of ``N`` chunks. One seeded shuffle orders all of
them, and batch ``i`` (the pod's ``JOB_COMPLETION_INDEX``) owns the shuffled positions
``[i*B, min((i+1)*B, N))``. The shuffle is never materialised: ``permute(p, N, seed)`` is a
format-preserving permutation (a 4-round balanced Feistel network over the smallest even
bit-width covering ``N``, cycle-walked into ``[0, N)``), so each worker computes its own
window in O(batch size) time and memory and no coordinator is needed.

Bit-compatible with cave-pipeline 0.0.2: the same seed gives the same batches (its README's
toy example, 8x6x3 grid, batch size 15, seed 42, is the test vector). Pure: numpy only, no I/O.
"""

from __future__ import annotations

import operator
from functools import lru_cache

import numpy as np

__all__ = [  # grouped by role
    "MAX_N",
    "permute",
    "unpermute",
    "permute_many",
    "unpermute_many",
    "num_batches",
    "layer_batch_size",
    "batch_coords",
    "coord_to_batch_index",
]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_ROUNDS = 4
# Outputs are returned as int64, so N may not exceed 2^63; the Feistel domain then fits uint64.
MAX_N = 1 << 63

Shape = tuple[int, int, int]


def _splitmix64(x: int) -> int:
    """Standard SplitMix64 finalizer on a Python int, all arithmetic mod 2^64."""
    z = (x + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * _MIX1) & _M64
    z = ((z ^ (z >> 27)) * _MIX2) & _M64
    return z ^ (z >> 31)


def _splitmix64_inplace(z: np.ndarray, tmp: np.ndarray) -> None:
    """SplitMix64 on a uint64 array in place (``tmp`` is same-shape scratch).

    uint64 array arithmetic wraps mod 2^64, exactly what SplitMix64 wants; in-place ufuncs
    avoid a temporary per operation.
    """
    z += np.uint64(_GOLDEN)
    np.right_shift(z, np.uint64(30), out=tmp)
    z ^= tmp
    z *= np.uint64(_MIX1)
    np.right_shift(z, np.uint64(27), out=tmp)
    z ^= tmp
    z *= np.uint64(_MIX2)
    np.right_shift(z, np.uint64(31), out=tmp)
    z ^= tmp


@lru_cache(maxsize=64)
def _round_keys(seed: int) -> tuple[int, ...]:
    """Round key i = splitmix64(seed + i); computed once per seed, not per call."""
    return tuple(_splitmix64((seed + i) & _M64) for i in range(_ROUNDS))


def _half_width(n: int) -> int:
    """Bits per Feistel half: the domain 2^(2*half) is the smallest even power of two >= n."""
    total = max(2, (n - 1).bit_length())
    return (total + 1) // 2


def _check_n_seed(n: int, seed: int) -> tuple[int, int]:
    n, seed = operator.index(n), operator.index(seed)
    if not 1 <= n <= MAX_N:
        raise ValueError(f"chunk count {n} is out of range: valid 1..2**63")
    if seed < 0:
        raise ValueError(f"seed {seed} is negative: valid seeds are integers >= 0")
    return n, seed


def _walk(pos: int, n: int, seed: int, inverse: bool) -> int:
    n, seed = _check_n_seed(n, seed)
    pos = operator.index(pos)
    if not 0 <= pos < n:
        raise ValueError(f"position {pos} is out of range: valid 0..{n - 1} for {n} chunks")
    if n == 1:
        return 0
    half = _half_width(n)
    mask = (1 << half) - 1
    keys = _round_keys(seed)
    x = pos
    while True:  # cycle-walk: the Feistel domain is < 4n, so this loops < 4 times on average
        left, right = x >> half, x & mask
        if inverse:
            for k in reversed(keys):
                left, right = right ^ (_splitmix64(left ^ k) & mask), left
        else:
            for k in keys:
                left, right = right, left ^ (_splitmix64(right ^ k) & mask)
        x = (left << half) | right
        if x < n:
            return x


def permute(pos: int, n: int, seed: int) -> int:
    """Return the value at shuffled position ``pos`` of the seeded permutation of ``[0, n)``."""
    return _walk(pos, n, seed, inverse=False)


def unpermute(value: int, n: int, seed: int) -> int:
    """Inverse of :func:`permute`: the position ``p`` with ``permute(p, n, seed) == value``."""
    return _walk(value, n, seed, inverse=True)


# Lanes per block: the Feistel rounds make ~50 passes over their buffers, so working in
# cache-sized blocks (4 buffers of 256 KiB) instead of whole windows avoids being bound by
# memory bandwidth on large windows and caps the scratch memory at O(block).
_BLOCK = 1 << 15


def _feistel_inplace(x: np.ndarray, half: int, keys: tuple[int, ...], inverse: bool) -> None:
    """One pass of the Feistel network (no cycle-walk) over a 1-D uint64 array, in place."""
    mask = np.uint64((1 << half) - 1)
    shift = np.uint64(half)
    order = tuple(reversed(keys)) if inverse else keys
    for start in range(0, x.size, _BLOCK):
        xb = x[start : start + _BLOCK]
        left, right = xb >> shift, xb & mask
        f, tmp = np.empty_like(xb), np.empty_like(xb)
        for k in order:
            # Forward: L, R = R, L ^ F(R).  Inverse: L, R = R ^ F(L), L.  F is computed into
            # `f` and folded into the half that changes, so rounds allocate nothing.
            src, dst = (left, right) if inverse else (right, left)
            np.bitwise_xor(src, np.uint64(k), out=f)
            _splitmix64_inplace(f, tmp)
            f &= mask
            dst ^= f
            left, right = right, left
        np.left_shift(left, shift, out=xb)
        xb |= right


def _walk_many(positions: np.ndarray, n: int, seed: int, inverse: bool) -> np.ndarray:
    n, seed = _check_n_seed(n, seed)
    arr = np.asarray(positions)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"positions must be an integer array, got dtype {arr.dtype}")
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=np.int64)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n:
        bad = lo if lo < 0 else hi
        raise ValueError(f"position {bad} is out of range: valid 0..{n - 1} for {n} chunks")
    if n == 1:
        return np.zeros(arr.shape, dtype=np.int64)
    half, keys, limit = _half_width(n), _round_keys(seed), np.uint64(n)
    out = arr.astype(np.uint64, order="C").ravel()  # a private copy: safe to work in place
    with np.errstate(over="ignore"):
        _feistel_inplace(out, half, keys, inverse)
        # Cycle-walk only the lanes still outside [0, n): each pass keeps < 3/4 of them.
        todo = np.flatnonzero(out >= limit)
        while todo.size:
            vals = out[todo]
            _feistel_inplace(vals, half, keys, inverse)
            out[todo] = vals
            todo = todo[vals >= limit]
    return out.view(np.int64).reshape(arr.shape)  # every value < n <= 2^63 fits int64


def permute_many(positions: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Vectorised :func:`permute`: an int64 array, elementwise equal to the scalar results.

    Memory is the output plus fixed block-sized scratch: O(len(positions)), never O(n).
    """
    return _walk_many(positions, n, seed, inverse=False)


def unpermute_many(values: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Vectorised :func:`unpermute` (int64 array)."""
    return _walk_many(values, n, seed, inverse=True)


def _check_grid(shape: Shape, batch_size: int) -> tuple[Shape, int, int]:
    """Validate ``shape`` and ``batch_size``; return them normalised plus the chunk count."""
    dims = tuple(operator.index(s) for s in shape)
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(f"grid shape {tuple(shape)} is invalid: need 3 sizes, each >= 1")
    n = dims[0] * dims[1] * dims[2]
    if n > MAX_N:
        raise ValueError(f"grid shape {dims} has {n} chunks: valid up to 2**63")
    batch_size = operator.index(batch_size)
    if batch_size < 1:
        raise ValueError(f"batch size {batch_size} is invalid: valid sizes are >= 1")
    return dims, n, batch_size  # type: ignore[return-value]


def num_batches(shape: Shape, batch_size: int) -> int:
    """Number of batches (Indexed Job completions) for a grid: ``ceil(N / batch_size)``."""
    _, n, batch_size = _check_grid(shape, batch_size)
    return -(-n // batch_size)


def layer_batch_size(batch_size: int, layer: int) -> int:
    """Batch size at ``layer`` (layers start at 2): halves per layer above 2, never below 1."""
    batch_size, layer = operator.index(batch_size), operator.index(layer)
    if batch_size < 1:
        raise ValueError(f"batch size {batch_size} is invalid: valid sizes are >= 1")
    if layer < 2:
        raise ValueError(f"layer {layer} is invalid: chunk layers start at 2")
    return max(1, batch_size // 2 ** (layer - 2))


def batch_coords(index: int, shape: Shape, seed: int, batch_size: int) -> np.ndarray:
    """Chunk coordinates of batch ``index`` as a ``(k, 3)`` int64 array, in window order.

    Position ``p`` of the window maps to ``unravel(permute(p, N, seed), shape)`` (C order).
    """
    (_, ny, nz), n, batch_size = _check_grid(shape, batch_size)
    index = operator.index(index)
    last = -(-n // batch_size) - 1
    if not 0 <= index <= last:
        where = "negative" if index < 0 else "past the last batch"
        raise ValueError(
            f"batch index {index} is {where}: valid 0..{last} "
            f"for {n} chunks at batch size {batch_size}"
        )
    start = index * batch_size
    flat = permute_many(np.arange(start, min(start + batch_size, n), dtype=np.int64), n, seed)
    # C order, z fastest: flat = x*Y*Z + y*Z + z.
    return np.stack([flat // (ny * nz), (flat // nz) % ny, flat % nz], axis=1)


def coord_to_batch_index(
    coord: tuple[int, int, int], shape: Shape, seed: int, batch_size: int
) -> int:
    """The batch that owns chunk ``coord`` (the inverse of :func:`batch_coords`)."""
    dims, n, batch_size = _check_grid(shape, batch_size)
    c = tuple(operator.index(v) for v in coord)
    if len(c) != 3 or not all(0 <= v < d for v, d in zip(c, dims, strict=True)):
        raise ValueError(
            f"chunk coordinate {tuple(coord)} is outside the grid: "
            f"valid (0..{dims[0] - 1}, 0..{dims[1] - 1}, 0..{dims[2] - 1})"
        )
    flat = (c[0] * dims[1] + c[1]) * dims[2] + c[2]
    return unpermute(flat, n, seed) // batch_size
