"""What the controller itself uses for one run, counted as it works: reconciles (each billed
as a function invocation), their wall time (Cloud Run functions bill instance time, not CPU),
Firestore document reads and writes, Pub/Sub messages and log bytes. Pure module.

The counts are stored on the run document with the commits the controller makes anyway: a
reconcile that changes nothing adds its counts to the next one that does (a warm instance
keeps them meanwhile; an instance that stops loses them, so the counts are a floor).
`shared.money.bill` prices them. See docs/bigtable-ramp-and-bill.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

POD_PAGE = 1000  # pod records per Firestore document (the store's page)


@dataclass(frozen=True)
class ControllerUsage:
    reconciles: int = 0
    busy_s: float = 0.0
    reads: int = 0
    writes: int = 0
    messages: int = 0
    log_bytes: int = 0

    def __add__(self, other: ControllerUsage) -> ControllerUsage:
        return ControllerUsage(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(self))
        )

    def to_doc(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> ControllerUsage:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (doc or {}).items() if k in known})

    @property
    def counted(self) -> bool:
        return self.reconciles > 0


def reconcile_usage(
    layers: int,
    committed: bool,
    changed_layers: int,
    pod_records: int,
    alerts: int,
    busy_s: float,
    log_bytes: int,
) -> ControllerUsage:
    """One reconcile of a run with `layers` layer documents: it reads the run and its layers
    (and the version again when it commits); a commit writes the run, its changed layers, the
    pod records in pages and the alerts into the outbox; one trigger message, and one message
    per alert published."""
    writes = 0
    if committed:
        writes = 1 + changed_layers + math.ceil(pod_records / POD_PAGE) + alerts
    return ControllerUsage(
        reconciles=1,
        busy_s=busy_s,
        reads=1 + layers + (1 if committed else 0),
        writes=writes,
        messages=1 + alerts,
        log_bytes=log_bytes,
    )
