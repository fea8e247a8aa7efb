"""The tail watch's lease in Firestore (`watch_leases/ticks`): at most one tick watches at a
time (shared.control.advance_watch). Written with a precondition on the document's update time
(`lease_docs.LeaseDocs`), in the reconcile lease's stored shape (its `requests` counts the
watches begun). Mixed into FirestoreRunStore."""

from __future__ import annotations

from datetime import datetime

from google.cloud import firestore

from adapters.google.firestore_layout import FirestoreDocs
from adapters.google.lease_docs import LeaseDocs
from shared.ports.coalesce import Lease

WATCH_LEASES = "watch_leases"
WATCH_LEASE_ID = "ticks"


class WatchLeaseMixin:
    """WatchLeases on `self.db`, through the lease documents of `watch_leases`."""

    db: firestore.Client

    @property
    def _watch_leases(self) -> LeaseDocs:
        return LeaseDocs(self.db, WATCH_LEASES)

    def acquire_watch_lease(self, holder: str, expires_at: datetime, now: datetime) -> bool:
        """Take the watch lease until `expires_at` unless another holder's is live; False if
        one is (that tick is watching: this one does not)."""
        while True:
            lease, stamp = self._watch_leases.read(WATCH_LEASE_ID)
            if lease.live(now):
                return False
            taken = Lease(holder, expires_at, lease.requests + 1, lease.covered_until)
            if self._watch_leases.put(WATCH_LEASE_ID, taken, stamp):
                return True

    def release_watch_lease(self, holder: str) -> None:
        """Let go of the watch lease if `holder` still has it."""
        while True:
            lease, stamp = self._watch_leases.read(WATCH_LEASE_ID)
            if lease.holder != holder:
                return
            free = Lease(None, None, lease.requests, lease.covered_until)
            if self._watch_leases.put(WATCH_LEASE_ID, free, stamp):
                return


class FirestoreWatchLease(FirestoreDocs, WatchLeaseMixin):
    """WatchLeases on Firestore, on a client of its own."""
