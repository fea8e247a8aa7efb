"""PodInfo objects for the pure-core tests: one pod attempt as a cluster lists it, with the
defaults most tests share (job `j`, index 0, 1 vCPU / 2 GiB, created and started at T0)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.ports.cluster import PodInfo

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pod_info(uid: str = "u1", phase: str = "Running", **overrides: Any) -> PodInfo:
    """A pod `p-<uid>` of Job `j`; any PodInfo field can be overridden."""
    fields: dict[str, Any] = {
        "name": f"p-{uid}",
        "uid": uid,
        "job_name": "j",
        "index": 0,
        "phase": phase,
        "cpu_request": 1.0,
        "memory_request_gib": 2.0,
        "created": T0,
        "started": T0,
    }
    return PodInfo(**{**fields, **overrides})
