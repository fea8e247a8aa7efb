"""Coalescing of Job events per run: at most one reconcile in flight, no backlog. Pure module.

At full size Job events arrive faster than reconciles finish, from several function
instances at once. Running one reconcile per event makes them race on the run's version
(stale retries) and queue behind each other; most of them carry no news by the time they run.
So each run has a short-lived **reconcile lease** (`leases/{run}` in Firestore, written with
a precondition, never a transaction):

- an event is **covered** (acknowledged, nothing done) if a reconcile that began reading the
  run after the event happened has completed: it saw everything the event announces;
- otherwise, if another instance holds a live lease, the event **marks** it (bumps
  `requests`) and is acknowledged: the holder runs once more before it lets go, however many
  events marked it meanwhile (a thousand events become one follow-up reconcile);
- otherwise the instance **acquires** the lease and reconciles, then loops while new requests
  arrived since its last read, then releases, recording when its last read began.

A holder that dies leaves a lease that expires after `ttl`; the next event or the one-minute
tick (which does not use the lease) carries on, so the floor of correctness is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

DEFAULT_TTL_S = 30.0  # several reconciles at full size (each well under 2 s)
CLOCK_SKEW_S = 2.0  # event timestamps are the API server's clock, leases the functions'
MAX_FOLLOW_UPS = 20  # a holder hands over (lets go) after this many reruns


class Verdict(Enum):
    COVERED = "covered"  # a completed reconcile already saw it: acknowledge
    MARK = "mark"  # a live holder will run again for it: mark the lease, acknowledge
    ACQUIRE = "acquire"  # nobody is on it: take the lease and reconcile


@dataclass(frozen=True)
class Lease:
    """The stored lease of one run (all fields None/0 for a run never leased)."""

    holder: str | None = None
    expires_at: datetime | None = None
    requests: int = 0  # bumped by each event that found the lease held
    covered_until: datetime | None = None  # read start of the last completed reconcile

    def live(self, now: datetime) -> bool:
        return self.holder is not None and self.expires_at is not None and self.expires_at > now


def on_event(
    lease: Lease, event_time: datetime, now: datetime, skew_s: float = CLOCK_SKEW_S
) -> Verdict:
    """What an instance should do with an event of `event_time` given the stored lease."""
    if (
        lease.covered_until is not None
        and event_time + timedelta(seconds=skew_s) <= lease.covered_until
    ):
        return Verdict.COVERED
    if lease.live(now):
        return Verdict.MARK
    return Verdict.ACQUIRE


def acquired(lease: Lease, holder: str, now: datetime, ttl_s: float = DEFAULT_TTL_S) -> Lease:
    """The lease as written by an instance that takes it."""
    return Lease(holder, now + timedelta(seconds=ttl_s), lease.requests, lease.covered_until)


def marked(lease: Lease) -> Lease:
    """The lease with one more request for its holder."""
    return Lease(lease.holder, lease.expires_at, lease.requests + 1, lease.covered_until)


def run_again(lease: Lease, holder: str, requests_seen: int, follow_ups: int) -> bool:
    """After a reconcile: must the holder run once more? Yes if events marked the lease since
    it read the requests counter, it still holds the lease, and it has not rerun too often
    (then it releases and the next event or tick picks up)."""
    return lease.holder == holder and lease.requests > requests_seen and follow_ups < MAX_FOLLOW_UPS


def released(lease: Lease, read_started_at: datetime) -> Lease:
    """The lease as the holder leaves it: free, covering events up to its last read start."""
    covered = read_started_at
    if lease.covered_until is not None and lease.covered_until > covered:
        covered = lease.covered_until
    return Lease(None, None, lease.requests, covered)


def renewed(lease: Lease, now: datetime, ttl_s: float = DEFAULT_TTL_S) -> Lease:
    """The lease extended by its holder before a follow-up reconcile."""
    return Lease(lease.holder, now + timedelta(seconds=ttl_s), lease.requests, lease.covered_until)
