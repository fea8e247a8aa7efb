"""What pod accounting loses when pods vanish between two listings (issue 9).

Kubernetes deletes pods on suspend, scale-down, pod GC and node loss, and the local cluster
now does too. Accounting closes a vanished pod at its last sighting.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.cluster import PodInfo
from shared.pod_accounting import record_pods
from shared.state import LayerState

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def running(uid: str, started: float = 0.0) -> PodInfo:
    return PodInfo(
        name=f"p-{uid}",
        uid=uid,
        job_name="j",
        index=0,
        phase="Running",
        cpu_request=1.0,
        memory_request_gib=1.0,
        created=T0 + timedelta(seconds=started),
        started=T0 + timedelta(seconds=started),
    )


def test_a_pod_seen_running_then_gone_keeps_its_runtime_to_the_last_sighting() -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [running("a")], T0 + timedelta(seconds=60))  # seen running, 60 s in
    record_pods(ls, [], T0 + timedelta(seconds=120))  # deleted (suspend, node lost, ...)
    assert ls.cpu_seconds + ls.running_cpu_seconds >= 60.0


def test_a_vanished_pod_is_closed_at_its_last_sighting_not_later() -> None:
    """Two pods open; one vanishes, the other runs on and then finishes: the vanished one
    counts 60 s (its last sighting), the other its full runtime, nothing twice."""
    ls = LayerState("ingest", 2)
    record_pods(ls, [running("a"), running("b", started=30)], T0 + timedelta(seconds=60))
    b_done = replace(
        running("b", started=30), phase="Succeeded", finished=T0 + timedelta(seconds=150)
    )
    record_pods(ls, [b_done], T0 + timedelta(seconds=200))
    assert ls.cpu_seconds == pytest.approx(60.0 + 120.0)
    assert ls.running_cpu_seconds == 0.0
    record_pods(ls, [b_done], T0 + timedelta(seconds=260))  # a repeat listing adds nothing
    assert ls.cpu_seconds == pytest.approx(180.0)
