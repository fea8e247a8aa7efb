"""What a monitoring port raises when its source answered only part of a query (Cloud
Monitoring's `executionErrors` or `unreachable` regions in a `timeSeries.list` answer): the
figures it did read, which are a lower bound and never final, and why they are partial. The
callers decide what a partial figure is worth (docs/bigtable-ramp-and-bill.md,
docs/canary-and-rightsize.md). Pure: the type only.
"""

from __future__ import annotations

from typing import Any


class PartialAnswer(RuntimeError):
    """A query answered in part. `value` is what the port would have returned had the answer
    been complete (its figures may miss series or points); `reason` says what is missing."""

    def __init__(self, reason: str, value: Any) -> None:
        super().__init__(
            f"partial answer ({reason}): its figures are a lower bound; read again later"
        )
        self.reason, self.value = reason, value
