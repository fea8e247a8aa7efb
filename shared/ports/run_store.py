"""The run store port, split by role: runs (`RunRecords`), the alert outbox (`AlertOutbox`),
the reconcile lease (`ReconcileLeases`), run health (`RunHealthRecords`), event dedupe
(`EventSightings`) and the tail watch's lease (`WatchLeases`); `RunStore` is all of them.

Pure module: the Protocols and their errors. The Firestore adapters are in
`adapters.google` (one per role; `firestore_store.FirestoreRunStore` has every role).
See docs/ports-and-wiring.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from shared.model.state import RunState
from shared.ports.coalesce import Verdict


class RunNotFoundError(LookupError):
    """No such run; permanent (a message naming it is acknowledged, not retried)."""


class RunExistsError(ValueError):
    """A run of that id already exists."""


class StaleStateError(RuntimeError):
    """The run changed since it was read (another reconcile or an operator won the race)."""


@dataclass(frozen=True)
class StoredAlert:
    alert_id: str
    kind: str
    body: dict[str, Any]
    created_at: datetime
    sent: bool
    # The store's version of the entry as read (Firestore: its update time): a take is made
    # under it, so of two publishers that read the same entry only one takes it.
    read_version: Any = None


@dataclass(frozen=True)
class RunHealth:
    """Consecutive failed reconciles of one run (reset by a successful one): how many, since
    when, the last error, and whether this failure is the one that should alert."""

    failures: int
    since: datetime
    error: str
    alert_due: bool


class RunRecords(Protocol):
    """Runs and their layers: the state the controller decides from and commits, and the
    operators' actions change (`update_run`)."""

    def create_run(self, state: RunState) -> None:
        """Store a new run and all its layers; RunExistsError if the id is taken."""

    def load_run(self, run_id: str) -> RunState:
        """The run and its layers; RunNotFoundError if unknown."""

    def commit(
        self,
        before: RunState,
        after: RunState,
        alerts: list[dict[str, Any]] = (),
        pod_records: dict[str, list[dict[str, Any]]] | None = None,
        config_versions: list[dict[str, Any]] = (),
    ) -> None:
        """Write `after` if the stored version is still `before.version` (else
        StaleStateError), bumping the version; `alerts` are added to the run's outbox in the
        same atomic write; `pod_records` (layer key -> pod attempt docs) are stored too, and
        `config_versions` (history entries, as `add_config_version` takes them) in the same
        atomic write."""

    def run_version(self, run_id: str) -> int:
        """The run's stored version (one small read); RunNotFoundError if unknown."""

    def update_run(self, run_id: str, mutate: Callable[[RunState], None]) -> RunState:
        """Load, apply `mutate`, commit; retried on StaleStateError. For operator actions."""

    def run_for_job(self, job_name: str) -> str | None:
        """The run that owns a Job name, if any."""

    def active_runs(self) -> list[str]:
        """Runs that are running or paused."""

    def runs_of_graph(self, graph_id: str) -> list[RunState]:
        """Every run of one graph, any status (layers not loaded)."""

    def list_runs(self) -> list[RunState]:
        """Every run, newest first (layers not loaded)."""


class AlertOutbox(Protocol):
    """The alerts `commit` and `record_reconcile_failure` put into a run's outbox, until a
    flusher has published them (at least once, never lost)."""

    def unsent_alerts(self, run_id: str) -> list[StoredAlert]:
        """Outbox alerts not yet published and not taken by a live publisher."""

    def take_alert(self, run_id: str, alert: StoredAlert, holder: str) -> bool:
        """Take an unsent alert to publish it (the outbox take), under a precondition on the
        entry as read; False if another publisher changed it first."""

    def give_back_alert(self, run_id: str, alert_id: str) -> None:
        """Give a taken alert back (its publish failed): the next publish sends it."""

    def mark_alerts_sent(
        self,
        run_id: str,
        alert_ids: list[str],
        published: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Record that alerts were published; `published`: the bodies as published where
        they differ from the committed ones (log tails filled, a claim_lost check decided),
        kept in their place so `pipeline alerts` shows what was sent."""

    def discard_alerts(self, run_id: str, alert_ids: list[str]) -> None:
        """Remove taken entries that turned out to need no publish (a claim_lost check
        whose pods logged no lost claim)."""


class ReconcileLeases(Protocol):
    """The reconcile lease (shared.ports.coalesce): at most one event-driven reconcile per run."""

    def lease_for_event(
        self, run_id: str, event_time: datetime, holder: str, now: datetime
    ) -> tuple[Verdict, int]:
        """Covered, marked for the live holder, or acquired; with the requests counter."""

    def renew_or_release_lease(
        self,
        run_id: str,
        holder: str,
        requests_seen: int,
        read_started_at: datetime,
        follow_ups: int,
        now: datetime,
    ) -> int | None:
        """Renew and return the counter to run once more for, or release (None)."""

    def abandon_lease(self, run_id: str, holder: str) -> None:
        """Release the lease after a failed reconcile, covering nothing new."""


class RunHealthRecords(Protocol):
    """Consecutive failed reconciles of a run (`run_unhealthy` once per spell)."""

    def record_reconcile_failure(
        self, run_id: str, error: str, now: datetime, alert_after: int
    ) -> RunHealth | None:
        """Count one more consecutive failed reconcile (outside the version precondition: a
        run that cannot be reconciled cannot commit either). `alert_due` is True exactly once
        per unhealthy spell, on the failure that reaches `alert_after`; that same write puts a
        `run_unhealthy` alert into the run's outbox. None if no such run."""

    def record_reconcile_success(self, run_id: str) -> None:
        """End an unhealthy spell, if any (the next spell alerts again)."""


class EventSightings(Protocol):
    """Dedupe of at-least-once event deliveries."""

    def first_sighting(self, event_id: str, expires_at: datetime) -> bool:
        """True the first time an event id is seen (dedupe of at-least-once delivery)."""

    def forget_sighting(self, event_id: str) -> None:
        """Undo `first_sighting` (the event was not handled: its redelivery must pass)."""


class WatchLeases(Protocol):
    """The tail watch's lease (shared.control.advance_watch): at most one tick watches at a time."""

    def acquire_watch_lease(self, holder: str, expires_at: datetime, now: datetime) -> bool:
        """Take the watch lease until `expires_at`; False if another holder's is live."""

    def release_watch_lease(self, holder: str) -> None:
        """Let go of the watch lease if `holder` still has it."""


class RunStore(
    RunRecords,
    AlertOutbox,
    ReconcileLeases,
    RunHealthRecords,
    EventSightings,
    WatchLeases,
    Protocol,
):
    """Every role of the run store on one object: what `Controller` takes, to hand each of its
    parts the narrow roles above it uses (the Firestore adapter is `FirestoreRunStore`; each
    role also has an adapter of its own)."""
