"""The alert outbox role of the run store on Firestore (`runs/{run}/alerts/{id}`): alerts
are added in the same write as the state change that raised them (`FirestoreRuns.commit`,
`FirestoreRunHealth`), then taken, published and marked sent by a publisher."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from adapters.google.firestore_layout import ALERTS, FirestoreDocs
from shared.ports.run_store import StoredAlert

# An outbox take older than this is taken to be a publisher that died before publishing:
# the alert is taken again (at least once), never lost. The take is stored in the entry's
# `claimed_at` / `claimed_by` fields (their names kept: stored outboxes read on).
ALERT_TAKE_S = 300.0


class FirestoreOutbox(FirestoreDocs):
    """AlertOutbox on Firestore."""

    def unsent_alerts(self, run_id: str) -> list[StoredAlert]:
        query = (
            self._run(run_id)
            .collection(ALERTS)
            .where(filter=firestore.FieldFilter("sent", "==", False))
        )
        stale = datetime.now(UTC) - timedelta(seconds=ALERT_TAKE_S)
        out = [
            StoredAlert(
                d.id,
                d.get("kind"),
                json.loads(d.get("body")),
                d.get("created_at"),
                False,
                d.update_time,
            )
            for d in query.stream()
            if (d.to_dict().get("claimed_at") or stale) <= stale
        ]
        return sorted(out, key=lambda a: a.created_at)

    def take_alert(self, run_id: str, alert: StoredAlert, holder: str) -> bool:
        ref = self._run(run_id).collection(ALERTS).document(alert.alert_id)
        option = self.db.write_option(last_update_time=alert.read_version)
        try:
            # The server's clock, as `unsent_alerts` compares with the real time.
            ref.update(
                {"claimed_at": firestore.SERVER_TIMESTAMP, "claimed_by": holder}, option=option
            )
        except (gexc.FailedPrecondition, gexc.Aborted, gexc.NotFound):
            return False
        return True

    def give_back_alert(self, run_id: str, alert_id: str) -> None:
        ref = self._run(run_id).collection(ALERTS).document(alert_id)
        ref.update({"claimed_at": None, "claimed_by": ""})

    def all_alerts(self, run_id: str) -> list[StoredAlert]:
        docs = self._run(run_id).collection(ALERTS).stream()
        out = [
            StoredAlert(
                d.id, d.get("kind"), json.loads(d.get("body")), d.get("created_at"), d.get("sent")
            )
            for d in docs
        ]
        return sorted(out, key=lambda a: a.created_at)

    def discard_alerts(self, run_id: str, alert_ids: list[str]) -> None:
        batch = self.db.batch()
        for alert_id in alert_ids:
            batch.delete(self._run(run_id).collection(ALERTS).document(alert_id))
        if alert_ids:
            batch.commit()

    def mark_alerts_sent(
        self,
        run_id: str,
        alert_ids: list[str],
        published: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        batch = self.db.batch()
        for alert_id in alert_ids:
            update: dict[str, Any] = {"sent": True}
            body = (published or {}).get(alert_id)
            if body is not None:
                text = json.dumps(body, default=str)
                if len(text) <= MAX_STORED_BODY_CHARS:  # else the committed body stays
                    update["body"] = text
            batch.update(self._run(run_id).collection(ALERTS).document(alert_id), update)
        if alert_ids:
            batch.commit()


# A published body kept in place of the committed one (a claim_lost check becomes its alert)
# only below this size: well inside Firestore's 1 MiB document.
MAX_STORED_BODY_CHARS = 200_000


def outbox_doc(alert: dict[str, Any], now: datetime) -> dict[str, Any]:
    """An unsent outbox entry. The body is kept as JSON text: it is the message to publish,
    and Firestore cannot store the nested arrays it holds (a batch's chunk coordinates)."""
    body = json.dumps(alert, default=str)
    return {"kind": alert["kind"], "body": body, "created_at": now, "sent": False}
