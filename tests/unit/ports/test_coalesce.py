"""The pure coalescing decisions of shared.ports.coalesce (table-driven)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.ports import coalesce
from shared.ports.coalesce import Lease, Verdict

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


@pytest.mark.parametrize(
    ("lease", "event_s", "now_s", "want"),
    [
        (Lease(), 0, 1, Verdict.ACQUIRE),  # never leased
        (Lease(covered_until=at(10)), 5, 11, Verdict.COVERED),  # older than a finished read
        (Lease(covered_until=at(10)), 9, 11, Verdict.ACQUIRE),  # within the clock skew
        (Lease(covered_until=at(10)), 12, 13, Verdict.ACQUIRE),  # news after the last read
        (Lease("h", at(40), 3, at(10)), 12, 13, Verdict.MARK),  # live holder reruns for it
        (Lease("h", at(40), 3, at(10)), 5, 13, Verdict.COVERED),  # covered beats marking
        (Lease("h", at(20), 3, at(10)), 12, 25, Verdict.ACQUIRE),  # holder's lease expired
    ],
)
def test_on_event(lease, event_s, now_s, want):
    assert coalesce.on_event(lease, at(event_s), at(now_s)) is want


@pytest.mark.parametrize(
    ("lease", "seen", "follow_ups", "want"),
    [
        (Lease("h", at(30), 5), 5, 0, False),  # nothing arrived meanwhile
        (Lease("h", at(30), 7), 5, 0, True),  # two events marked it: one more run
        (Lease("other", at(30), 7), 5, 0, False),  # taken over after expiry
        (Lease("h", at(30), 7), 5, coalesce.MAX_FOLLOW_UPS, False),  # hand over, no livelock
    ],
)
def test_run_again(lease, seen, follow_ups, want):
    assert coalesce.run_again(lease, "h", seen, follow_ups) is want


def test_acquire_mark_release_cycle():
    lease = coalesce.acquired(Lease(requests=2, covered_until=at(1)), "h", at(5), ttl_s=30)
    assert lease == Lease("h", at(35), 2, at(1)) and lease.live(at(34)) and not lease.live(at(35))
    lease = coalesce.marked(coalesce.marked(lease))
    assert lease.requests == 4
    free = coalesce.released(lease, read_started_at=at(6))
    assert free == Lease(None, None, 4, at(6)) and not free.live(at(7))
    # covered_until never goes backwards (a slow holder releasing after a faster one)
    assert coalesce.released(Lease("h", at(9), 4, at(8)), at(6)).covered_until == at(8)
    assert coalesce.renewed(lease, at(20), ttl_s=30).expires_at == at(50)
