"""Lease documents in Firestore: one collection of `Lease`s (shared.ports.coalesce), read with
their update time and written under a precondition on it (never a transaction: contended
transactions wait and abort on the emulator). The reconcile lease (`reconcile_lease.py`,
`leases/{run}`) and the tail watch's (`watch_lease.py`, `watch_leases/ticks`) each hold one."""

from __future__ import annotations

from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.ports.coalesce import Lease


class LeaseDocs:
    """The lease documents of one Firestore collection."""

    def __init__(self, db: firestore.Client, collection: str) -> None:
        self.db, self.collection = db, collection

    def ref(self, doc_id: str) -> firestore.DocumentReference:
        """The document of one lease (for the unconditional field updates of a holder)."""
        return self.db.collection(self.collection).document(doc_id)

    def read(self, doc_id: str) -> tuple[Lease, Any]:
        """The stored lease and its update time (`Lease()` and None: never written)."""
        snap = self.ref(doc_id).get()
        if not snap.exists:
            return Lease(), None
        d = snap.to_dict()
        lease = Lease(
            d.get("holder"), d.get("expires_at"), d.get("requests", 0), d.get("covered_until")
        )
        return lease, snap.update_time

    def put(self, doc_id: str, lease: Lease, update_time: Any) -> bool:
        """Write the lease if nobody wrote it since it was read at `update_time` (None: it
        did not exist); False if someone did (the caller reads again and decides again)."""
        doc = {
            "holder": lease.holder,
            "expires_at": lease.expires_at,
            "requests": lease.requests,
            "covered_until": lease.covered_until,
        }
        try:
            if update_time is None:
                self.ref(doc_id).create(doc)
            else:
                option = self.db.write_option(last_update_time=update_time)
                self.ref(doc_id).update(doc, option=option)
            return True
        except (gexc.AlreadyExists, gexc.FailedPrecondition, gexc.Aborted):
            return False
