"""The port to what Cloud Monitoring knows of the graph's Bigtable instance: its CPU load
now (the ramp's gate, shared.reconcile.bigtable_load), and over a build's span its table's bytes and
its node count (the bill, shared.money.bill). Adapters: Cloud Monitoring's REST API
(adapters.google.monitoring) and the local stack's emulator meter
(adapters.local.bigtable_meter). Pure: types only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Sample:
    """One point of a time series: when, and the value."""

    at: datetime
    value: float


class BigtableMonitor(Protocol):
    """What the controller and the bill read about a Bigtable instance."""

    # How long a change of the instance's load takes to show in `cpu_load` (its sampling
    # window and reporting delay): the ramp's gate steps down at most once in that time.
    load_lag_s: float

    def cpu_load(self, project: str, instance: str) -> float | None:
        """The instance's CPU load now, 0..1 (the busiest cluster's); None: not known."""
        ...

    def table_bytes(
        self, project: str, instance: str, table: str, start: datetime, end: datetime
    ) -> list[Sample]:
        """The table's stored bytes over [start, end], oldest first (empty: not known)."""
        ...

    def node_counts(
        self, project: str, instance: str, start: datetime, end: datetime
    ) -> list[Sample]:
        """The instance's node count (summed over its clusters) over [start, end], oldest
        first, with the last point before `start` if there is one (empty: not known)."""
        ...
