"""A layer's size in chunks and batches, and the chunks its completed indexes hold: what
`pipeline status` (shared.views.progress) and the controller's progress log lines
(shared.control.build_metrics) count alike. Pure module.

Layers store Job indexes (batches); operators think in chunks. A layer of `chunks` chunks in
batches of `batch_size` has ceil(chunks / batch_size) indexes, every one full but the last,
so the chunks done follow from the completed index set and the last index alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.model import intervals


@dataclass(frozen=True)
class LayerSize:
    """How many chunks a layer has and how many each index (pod) builds."""

    chunks: int
    batch_size: int

    @property
    def batches(self) -> int:
        return -(-self.chunks // self.batch_size) if self.batch_size else 0


def chunks_done(completed_indexes: str, size: LayerSize) -> int:
    """Chunks in the completed indexes: full batches, the last one possibly short."""
    done = intervals.count(completed_indexes)
    if not done or not size.batch_size:
        return 0
    last = size.batches - 1
    short = size.batch_size * size.batches - size.chunks  # chunks the last batch lacks
    has_last = short and last in _maybe_last(completed_indexes)
    return min(size.chunks, done * size.batch_size - (short if has_last else 0))


def _maybe_last(text: str) -> set[int]:
    """The highest index of an interval string (cheap: no expansion of the ranges)."""
    tail = text.rsplit(",", 1)[-1].strip()
    return {int(tail.rsplit("-", 1)[-1])} if tail else set()
