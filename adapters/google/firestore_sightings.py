"""The event sightings role of the run store on Firestore (`dedupe/{event_id}`, with an
`expires_at` TTL field): at-least-once deliveries of one event are handled once."""

from __future__ import annotations

from datetime import datetime

from google.api_core import exceptions as gexc

from adapters.google.firestore_layout import DEDUPE, FirestoreDocs


class FirestoreSightings(FirestoreDocs):
    """EventSightings on Firestore."""

    def forget_sighting(self, event_id: str) -> None:
        self.db.collection(DEDUPE).document(event_id).delete()

    def first_sighting(self, event_id: str, expires_at: datetime) -> bool:
        try:
            self.db.collection(DEDUPE).document(event_id).create({"expires_at": expires_at})
            return True
        except gexc.AlreadyExists:
            return False
