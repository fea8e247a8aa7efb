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

from dataclasses import dataclass
from datetime import datetime

from google.cloud import firestore

RUNS, LAYERS, ALERTS, PODS = "runs", "layers", "alerts", "pods"
CONFIG_VERSIONS = "config_versions"
JOBS, DEDUPE = "jobs", "dedupe"
HEALTH = "reconcile_health"  # the run document's field outside RunState (firestore_run_health)
RUN_READS_KEPT = 1000  # runs whose last read is remembered (a project runs a handful)


@dataclass(frozen=True)
class RunRead:
    """What this client last saw of a run document: its `version`, the `update_time` it had
    then, and whether it held a reconcile-health spell. A version's update time is a valid
    precondition for a commit from that version (any later write changes it and fails the
    commit), so a commit need not read the document again; the health flag spares a
    successful reconcile the read of a spell that is not there."""

    version: int
    update_time: datetime
    health: bool


class FirestoreDocs:
    """A Firestore client (or the emulator's, found through FIRESTORE_EMULATOR_HOST) and the
    run documents' references: the base of every role adapter of the run store."""

    def __init__(self, project: str, client: firestore.Client | None = None) -> None:
        self.db = client or firestore.Client(project=project)
        # run id -> the run document as this client last read or wrote it (RunRead)
        self._run_reads: dict[str, RunRead] = {}

    def _remember_read(self, run_id: str, read: RunRead | None) -> None:
        """Remember (or, None, forget) what this client saw of a run document."""
        if read is None:
            self._run_reads.pop(run_id, None)
            return
        if len(self._run_reads) >= RUN_READS_KEPT and run_id not in self._run_reads:
            self._run_reads.clear()  # purged runs' entries; the next commit reads once
        self._run_reads[run_id] = read

    def _run(self, run_id: str) -> firestore.DocumentReference:
        return self.db.collection(RUNS).document(run_id)
