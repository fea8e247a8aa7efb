"""The run store's Firestore layout and the base of its role adapters (one Firestore client
each; `FirestoreRunStore` is one object with every role).

Layout: `runs/{run}` (run fields + `version`), `runs/{run}/layers/{stage}-L{n}`,
`runs/{run}/alerts/{id}` (the alert outbox), `runs/{run}/config_versions/{n}` (`pipeline
apply`'s history: who, when, the diff), `runs/{run}/layers/{key}/pods/{page}` (pod attempts,
a page of records per document), `jobs/{job_name}` -> run id, `dedupe/{event_id}` with an
`expires_at` TTL field, `leases/{run}` (the reconcile lease, `reconcile_lease.py`) and
`watch_leases/ticks` (the tail watch's, `watch_lease.py`).
"""

from __future__ import annotations

from google.cloud import firestore

RUNS, LAYERS, ALERTS, PODS = "runs", "layers", "alerts", "pods"
CONFIG_VERSIONS = "config_versions"
JOBS, DEDUPE = "jobs", "dedupe"


class FirestoreDocs:
    """A Firestore client (or the emulator's, found through FIRESTORE_EMULATOR_HOST) and the
    run documents' references: the base of every role adapter of the run store."""

    def __init__(self, project: str, client: firestore.Client | None = None) -> None:
        self.db = client or firestore.Client(project=project)

    def _run(self, run_id: str) -> firestore.DocumentReference:
        return self.db.collection(RUNS).document(run_id)
