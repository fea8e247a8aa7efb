"""The run health role of the run store on Firestore: consecutive failed reconciles of a
run, a field of its run document outside RunState (commits update only RunState's fields, so
they leave it alone)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from adapters.google.firestore_layout import ALERTS, HEALTH, FirestoreDocs
from adapters.google.firestore_outbox import outbox_doc
from shared.control.alerts import run_unhealthy_body
from shared.ports.run_store import RunHealth, StaleStateError

ERROR_CHARS = 2000  # of the last error kept on the run document


class FirestoreRunHealth(FirestoreDocs):
    """RunHealthRecords on Firestore."""

    def record_reconcile_failure(
        self, run_id: str, error: str, now: datetime, alert_after: int
    ) -> RunHealth | None:
        ref = self._run(run_id)
        for _ in range(10):
            snap = ref.get()
            if not snap.exists:
                return None
            old = (snap.to_dict() or {}).get(HEALTH) or {}
            failures = int(old.get("failures", 0)) + 1
            alert_due = failures >= alert_after and not old.get("alerted", False)
            new = {
                "failures": failures,
                "since": old.get("since", now),
                "at": now,
                "error": error[-ERROR_CHARS:],
                "alerted": bool(old.get("alerted", False)) or alert_due,
            }
            # Under the update time read: of two racing failures both count, one alerts. The
            # alert goes into the outbox in the same write, so a failed publish retries it on
            # the next flush instead of losing it for the whole spell.
            batch = self.db.batch()
            batch.update(
                ref, {HEALTH: new}, option=self.db.write_option(last_update_time=snap.update_time)
            )
            if alert_due:
                body = run_unhealthy_body(run_id, new["error"], failures, new["since"], now)
                batch.set(ref.collection(ALERTS).document(body["alert_id"]), outbox_doc(body, now))
            try:
                batch.commit()
            except (gexc.FailedPrecondition, gexc.Aborted):
                continue
            finally:
                # The document's update time has moved on (or is unknown): a commit from what
                # this client read before reads it again.
                self._remember_read(run_id, None)
            return RunHealth(failures, new["since"], new["error"], alert_due)
        raise StaleStateError(f"run {run_id}: too much contention recording a failure")

    def record_reconcile_success(self, run_id: str) -> None:
        """End the run's unhealthy spell, if any. The reconcile that succeeded read the run
        document (load_run) and, if it committed, wrote it under a precondition, so when that
        read saw no spell there is none to end and nothing is read again. A failure another
        instance records after that read is left for the next successful tick to clear (two
        ticks at once only: one tick function records failures)."""
        seen = self._run_reads.get(run_id)
        if seen is not None and not seen.health:
            return
        snap = self._run(run_id).get(field_paths=[HEALTH])
        if snap.exists and (snap.to_dict() or {}).get(HEALTH):
            self._run(run_id).update({HEALTH: firestore.DELETE_FIELD})
            self._remember_read(run_id, None)

    def reconcile_health(self, run_id: str) -> dict[str, Any] | None:
        """The run's unhealthy spell, if any (for `pipeline inspect` and tests)."""
        snap = self._run(run_id).get(field_paths=[HEALTH])
        return (snap.to_dict() or {}).get(HEALTH) if snap.exists else None
