"""The demo dataset: a synthetic segmentation volume generated from a seed.

Labels (uint32, 0 = background) are painted as thick random-walk tubes ("neurites") and
ellipsoids ("somata") until the requested foreground fraction is reached. Objects are sized
relative to the volume, so they cross many chunks at any chunk size; later objects paint over
earlier ones, so a label is often several disconnected pieces and labels touch each other.

Pure: numpy only. ``generate_volume`` is deterministic per (size, seed, n_labels, foreground).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["generate_volume", "save_volume", "load_volume"]

Shape = tuple[int, int, int]


def _paint_ball(vol: np.ndarray, center: np.ndarray, radius: float, label: int) -> None:
    """Set every voxel within ``radius`` of ``center`` (clipped to the volume) to ``label``."""
    lo = np.maximum(np.floor(center - radius).astype(int), 0)
    hi = np.minimum(np.ceil(center + radius).astype(int) + 1, vol.shape)
    if np.any(hi <= lo):
        return
    gx, gy, gz = (np.arange(a, b) - c for a, b, c in zip(lo, hi, center, strict=True))
    d2 = gx[:, None, None] ** 2 + gy[None, :, None] ** 2 + gz[None, None, :] ** 2
    view = vol[lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]]
    view[d2 <= radius * radius] = label


def _paint_ellipsoid(vol: np.ndarray, center: np.ndarray, radii: np.ndarray, label: int) -> None:
    lo = np.maximum(np.floor(center - radii).astype(int), 0)
    hi = np.minimum(np.ceil(center + radii).astype(int) + 1, vol.shape)
    if np.any(hi <= lo):
        return
    gx, gy, gz = (
        ((np.arange(a, b) - c) / r) ** 2 for a, b, c, r in zip(lo, hi, center, radii, strict=True)
    )
    inside = gx[:, None, None] + gy[None, :, None] + gz[None, None, :] <= 1.0
    vol[lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]][inside] = label


def _paint_tube(vol: np.ndarray, rng: np.random.Generator, label: int, scale: float) -> None:
    """A smooth random walk from a random start, painted as overlapping balls."""
    shape = np.array(vol.shape, dtype=float)
    radius = rng.uniform(0.035, 0.07) * scale
    radius = max(radius, 1.0)
    pos = rng.uniform(0, 1, 3) * shape
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    step = max(radius * 0.6, 0.7)
    n_steps = int(rng.uniform(0.6, 1.4) * scale / step)
    for _ in range(n_steps):
        _paint_ball(vol, pos, radius, label)
        direction += rng.normal(scale=0.25, size=3)
        direction /= np.linalg.norm(direction)
        pos = pos + direction * step
        out = (pos < 0) | (pos >= shape)
        if out.any():  # bounce off the walls so the tube stays in the volume
            direction[out] = -direction[out]
            pos = np.clip(pos, 0, shape - 1)


def generate_volume(
    size: tuple[int, int, int],
    seed: int,
    n_labels: int = 6,
    foreground: float = 0.4,
) -> np.ndarray:
    """A ``size`` uint32 label volume (0 = background) with labels ``1..n_labels``.

    Objects are added, cycling through the labels, until at least ``foreground`` of the
    voxels are labelled (about 0.4-0.5 at the default).
    """
    shape = tuple(int(s) for s in size)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"volume size {tuple(size)} is invalid: need 3 sizes, each >= 1")
    if n_labels < 1:
        raise ValueError(f"n_labels {n_labels} is invalid: need at least one label")
    if not 0.0 < foreground < 0.9:
        raise ValueError(f"foreground {foreground} is invalid: valid 0 < foreground < 0.9")
    rng = np.random.default_rng(seed)
    vol = np.zeros(shape, dtype=np.uint32)
    scale = float(np.cbrt(np.prod(shape)))
    target = foreground * vol.size
    for i in range(100_000):  # bounded: a huge volume with a tiny size ends anyway
        label = i % n_labels + 1
        if rng.uniform() < 0.75:
            _paint_tube(vol, rng, label, scale)
        else:
            center = rng.uniform(0, 1, 3) * np.array(shape)
            radii = np.maximum(rng.uniform(0.06, 0.16, 3) * scale, 1.0)
            _paint_ellipsoid(vol, center, radii, label)
        if i % n_labels == n_labels - 1 and np.count_nonzero(vol) >= target:
            break
    return vol


def save_volume(path: str | Path, vol: np.ndarray) -> None:
    """Write the volume as a ``.npy`` file (the dataset's ``data_source.watershed``)."""
    np.save(Path(path), np.ascontiguousarray(vol), allow_pickle=False)


def load_volume(path: str | Path, mmap: bool = True) -> np.ndarray:
    """Read a volume written by :func:`save_volume` (memory-mapped, read-only, by default)."""
    return np.load(Path(path), mmap_mode="r" if mmap else None, allow_pickle=False)
