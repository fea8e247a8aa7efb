"""Firestore adapter of the run store: one object with every role (`shared.ports.run_store`),
composed of the role adapters (layout: `firestore_layout.py`)."""

from __future__ import annotations

from adapters.google.firestore_outbox import FirestoreOutbox
from adapters.google.firestore_run_health import FirestoreRunHealth
from adapters.google.firestore_runs import FirestoreRuns
from adapters.google.firestore_sightings import FirestoreSightings
from adapters.google.reconcile_lease import ReconcileLeaseMixin
from adapters.google.watch_lease import WatchLeaseMixin


class FirestoreRunStore(
    FirestoreRuns,
    FirestoreOutbox,
    FirestoreRunHealth,
    FirestoreSightings,
    ReconcileLeaseMixin,
    WatchLeaseMixin,
):
    """RunStore on Firestore (or its emulator, found through FIRESTORE_EMULATOR_HOST): every
    role on one client, for the controller (`Controller` hands each of its parts the roles it
    uses: docs/ports-and-wiring.md)."""
