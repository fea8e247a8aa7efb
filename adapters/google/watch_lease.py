"""The tail watch's lease in Firestore (`watch_leases/ticks`): at most one tick watches at a
time (shared.control.advance_watch). Written with a precondition on the document's update time, as
the reconcile lease (`reconcile_lease.py`), whose stored shape and helpers it shares (its
`requests` counts the watches begun). Mixed into FirestoreRunStore."""

from __future__ import annotations

from datetime import datetime

from adapters.google.firestore_layout import FirestoreDocs
from adapters.google.reconcile_lease import ReconcileLeaseMixin
from shared.ports.coalesce import Lease

WATCH_LEASES = "watch_leases"
WATCH_LEASE_ID = "ticks"


class WatchLeaseMixin:
    """Needs ReconcileLeaseMixin's `_lease` and `_put_lease` (same collection and shape)."""

    def acquire_watch_lease(self, holder: str, expires_at: datetime, now: datetime) -> bool:
        """Take the watch lease until `expires_at` unless another holder's is live; False if
        one is (that tick is watching: this one does not)."""
        while True:
            lease, stamp = self._lease(WATCH_LEASE_ID, WATCH_LEASES)  # type: ignore[attr-defined]
            if lease.live(now):
                return False
            taken = Lease(holder, expires_at, lease.requests + 1, lease.covered_until)
            if self._put_lease(WATCH_LEASE_ID, taken, stamp, WATCH_LEASES):  # type: ignore[attr-defined]
                return True

    def release_watch_lease(self, holder: str) -> None:
        """Let go of the watch lease if `holder` still has it."""
        while True:
            lease, stamp = self._lease(WATCH_LEASE_ID, WATCH_LEASES)  # type: ignore[attr-defined]
            if lease.holder != holder:
                return
            free = Lease(None, None, lease.requests, lease.covered_until)
            if self._put_lease(WATCH_LEASE_ID, free, stamp, WATCH_LEASES):  # type: ignore[attr-defined]
                return


class FirestoreWatchLease(FirestoreDocs, WatchLeaseMixin, ReconcileLeaseMixin):
    """WatchLeases on Firestore, on a client of its own (the lease helpers are the reconcile
    lease's)."""
