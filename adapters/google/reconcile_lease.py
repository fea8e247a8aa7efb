"""The reconcile lease of a run in Firestore (`leases/{run}`): shared.ports.coalesce's decisions,
read and written with preconditions on the document's update time (`lease_docs.LeaseDocs`).
Mixed into FirestoreRunStore."""

from __future__ import annotations

from datetime import datetime

from google.cloud import firestore

from adapters.google.firestore_layout import FirestoreDocs
from adapters.google.lease_docs import LeaseDocs
from shared.ports import coalesce
from shared.ports.coalesce import Lease, Verdict

LEASES = "leases"


class ReconcileLeaseMixin:
    """At most one event-driven reconcile per run in flight; needs `self.db`."""

    db: firestore.Client

    @property
    def _reconcile_leases(self) -> LeaseDocs:
        return LeaseDocs(self.db, LEASES)

    def lease_for_event(
        self, run_id: str, event_time: datetime, holder: str, now: datetime
    ) -> tuple[Verdict, int]:
        """Covered, marked for the live holder, or acquired by `holder`; with the requests
        counter as read (the holder's starting point). A mark is an atomic increment, not a
        conditional write, so a storm of marks never starves the holder's own writes."""
        ref = self._reconcile_leases.ref(run_id)
        while True:
            lease, stamp = self._reconcile_leases.read(run_id)
            verdict = coalesce.on_event(lease, event_time, now)
            if verdict is Verdict.COVERED:
                return verdict, lease.requests
            if verdict is Verdict.MARK:
                ref.update({"requests": firestore.Increment(1)})
                # Released meanwhile? Its release missed our mark: take the lease instead.
                after, _ = self._reconcile_leases.read(run_id)
                if after.live(now):
                    return verdict, after.requests
                continue
            new = coalesce.acquired(lease, holder, now)
            if self._reconcile_leases.put(run_id, new, stamp):
                return verdict, new.requests

    def renew_or_release_lease(
        self,
        run_id: str,
        holder: str,
        requests_seen: int,
        read_started_at: datetime,
        follow_ups: int,
        now: datetime,
    ) -> int | None:
        """After the holder's reconcile: renew and return the requests counter to run once
        more for, or release (None). The release is conditional (a mark landing meanwhile
        fails it, and the holder runs again) until the holder has run MAX_FOLLOW_UPS times;
        then it lets go regardless and later marks fall to the next event or tick."""
        ref = self._reconcile_leases.ref(run_id)
        while True:
            lease, stamp = self._reconcile_leases.read(run_id)
            if lease.holder != holder:
                return None  # expired and taken over: the new holder carries on
            if coalesce.run_again(lease, holder, requests_seen, follow_ups):
                ref.update({"expires_at": coalesce.renewed(lease, now).expires_at})
                return lease.requests
            free = coalesce.released(lease, read_started_at)
            if self._reconcile_leases.put(run_id, free, stamp):
                return None
            if follow_ups >= coalesce.MAX_FOLLOW_UPS:
                ref.update(
                    {"holder": None, "expires_at": None, "covered_until": free.covered_until}
                )
                return None

    def abandon_lease(self, run_id: str, holder: str) -> None:
        """Let go of the lease after a failed reconcile, covering nothing new."""
        while True:
            lease, stamp = self._reconcile_leases.read(run_id)
            if lease.holder != holder:
                return
            free = Lease(None, None, lease.requests, lease.covered_until)
            if self._reconcile_leases.put(run_id, free, stamp):
                return


class FirestoreReconcileLeases(FirestoreDocs, ReconcileLeaseMixin):
    """ReconcileLeases on Firestore, on a client of its own."""
