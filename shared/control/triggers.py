"""When to reconcile which run: the controller's triggers (docs/controller.md).

A trigger decides only whether and for which run the reconciler runs; what a reconcile does is
`shared.control.reconciler`'s, the same whichever trigger asked.

- **Job event** (`on_job_event`): dropped when older than its max age or about a Job no run
  owns; then the run's **reconcile lease** (shared.ports.coalesce) says covered (a reconcile that
  began after the event has completed), mark (a live holder reconciles once more for it) or
  acquire; the event id's first sighting dedupes a redelivery; the holder reconciles, then
  again for each mark that arrived meanwhile (the follow-ups), then releases the lease. A
  failure releases the lease and forgets the sighting, so the redelivery is handled.
- **Tick** (`on_tick`): every active run, isolated (one that fails is counted and skipped;
  `run_unhealthy` after UNHEALTHY_AFTER failures in a row); raises to be redelivered only
  when every run failed for a transient reason. Then the **tail watch** (`watch_tails`):
  the layers about to finish, watched for what is left of the tick's budget under the
  **watch lease** (shared.control.advance_watch, docs/ticks-and-evictions.md); in its last
  seconds a finished run is handed to the kick function (`kick`, action `tail-watch`).
- **Kick** (`on_kick`): an operator's action already recorded: reconcile that run now.

Each reconcile a trigger ran is logged (`reconciled`, with the trigger). A message a trigger
failed on too often comes back as a dead letter: `alert_dead_letter` turns it into an alert.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.control import dead_letters
from shared.control.advance_watch import WatchPolicy, watch, watch_lease_expiry, watch_window
from shared.control.controller_log import log_json, log_published_alert
from shared.control.job_events import JobEvent
from shared.control.outbox import Outbox
from shared.control.reconciler import ReconcileResult
from shared.model.state import RunState
from shared.ports.cluster import ClusterReader, ClusterUnreachableError
from shared.ports.coalesce import Verdict
from shared.ports.run_store import (
    EventSightings,
    ReconcileLeases,
    RunHealthRecords,
    RunNotFoundError,
    RunRecords,
    WatchLeases,
)

log = logging.getLogger("cave_pipeline.triggers")

UNHEALTHY_AFTER = 5  # consecutive failed tick reconciles of one run before `run_unhealthy`
# Failures that say nothing about the run itself: if every run fails with one, the tick is
# retried by Pub/Sub rather than acknowledged.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ClusterUnreachableError,
    ConnectionError,
    TimeoutError,
)


class Reconciles(Protocol):
    """What the triggers run: one reconcile of a run (shared.control.reconciler.Reconciler)."""

    def reconcile(self, run_id: str) -> ReconcileResult:
        """Bring one run one step closer to done."""


@dataclass(frozen=True)
class TriggerStores:
    """The run store's roles the triggers use (shared.ports.run_store): the runs they pick,
    the reconcile lease events coalesce under, the event sightings that dedupe them, the run
    health a failed tick reconcile counts on, and the tail watch's lease. The wiring passes
    one store for all of them."""

    runs: RunRecords
    leases: ReconcileLeases
    sightings: EventSightings
    health: RunHealthRecords
    watch_leases: WatchLeases


# A kick message's publisher: (run id, action) -> None (the `kick` topic, to `on_kick`).
PublishKick = Callable[[str, str], None]
HANDOFF_ACTION = "tail-watch"  # the action of a kick the tail watch hands a run off with


class Triggers:
    """The trigger rules around one reconciler (any `Reconciles`: a benchmark may hand a
    counting wrapper of the real one), publishing through `outbox`; `kick` publishes a kick
    message, the tail watch's hand-off in its last seconds (None: the watch ends at its
    budget)."""

    def __init__(
        self,
        stores: TriggerStores,
        cluster: ClusterReader,
        reconciler: Reconciles,
        outbox: Outbox,
        clock: Callable[[], datetime],
        kick: PublishKick | None = None,
    ) -> None:
        self.stores, self.cluster, self.reconciler = stores, cluster, reconciler
        self.outbox, self.clock, self.kick = outbox, clock, kick

    def reconcile(self, run_id: str) -> ReconcileResult:
        """One reconcile of the run (shared.control.reconciler), whatever asked for it."""
        return self.reconciler.reconcile(run_id)

    def flush_alerts(self, run_id: str) -> int:
        """Publish the run's outbox now (shared.control.outbox); the number published."""
        return self.outbox.publish(run_id)

    # ---- Job events ---------------------------------------------------------------------
    def on_job_event(self, event: JobEvent, max_age_s: float = 3600.0) -> ReconcileResult | None:
        """A Job event: drop stale ones, coalesce under the run's reconcile lease (covered,
        marked for the holder, or acquired here), dedupe, reconcile the owning run and its
        follow-ups. None when nothing was reconciled here."""
        now = self.clock()
        if (now - event.timestamp).total_seconds() > max_age_s:
            _log("INFO", "stale job event dropped", job=event.job_name, reason=event.reason)
            return None
        run_id = self.stores.runs.run_for_job(event.job_name)
        if run_id is None:
            return None  # not ours (another tool's Job) or a run since purged
        # The lease first: a covered event needs no dedupe write either.
        holder = uuid.uuid4().hex
        verdict, seen = self.stores.leases.lease_for_event(run_id, event.timestamp, holder, now)
        duplicate = verdict is not Verdict.COVERED and bool(event.insert_id)
        duplicate = duplicate and not self.stores.sightings.first_sighting(
            event.insert_id, now + timedelta(seconds=max_age_s)
        )
        if verdict is Verdict.ACQUIRE and duplicate:
            self.stores.leases.abandon_lease(run_id, holder)
        if verdict is not Verdict.ACQUIRE or duplicate:
            msg = "duplicate" if duplicate else verdict.value
            _log("INFO", f"job event {msg}", run=run_id, job=event.job_name)
            return None
        try:
            result = self._reconcile_holding_lease(run_id, holder, seen)
        except Exception:
            # Not handled after all: let the redelivery through the dedupe and the lease.
            self.stores.leases.abandon_lease(run_id, holder)
            if event.insert_id:
                self.stores.sightings.forget_sighting(event.insert_id)
            raise
        log_reconciled(result, "job-event", job=event.job_name, reason=event.reason)
        return result

    def _reconcile_holding_lease(self, run_id: str, holder: str, seen: int) -> ReconcileResult:
        """Reconcile, then once more while events marked the lease meanwhile (at most
        shared.ports.coalesce.MAX_FOLLOW_UPS times), then release it."""
        follow_ups = 0
        while True:
            read_at = self.clock()
            result = self.reconcile(run_id)
            more = self.stores.leases.renew_or_release_lease(
                run_id, holder, seen, read_at, follow_ups, self.clock()
            )
            if more is None:
                return result
            seen, follow_ups = more, follow_ups + 1

    # ---- ticks --------------------------------------------------------------------------
    def on_tick(self) -> list[ReconcileResult]:
        """The heartbeat: reconcile every active run (ramps, stalls, lost events).

        Runs are isolated: one that raises is logged, counted on its run document and
        skipped, so it never holds up the others; after UNHEALTHY_AFTER consecutive failures
        a `run_unhealthy` alert is sent once (until a reconcile of it succeeds again). The
        tick raises (to be redelivered) only when every run failed for a transient reason."""
        results: list[ReconcileResult] = []
        failures: list[Exception] = []
        tried = 0
        for run_id in self.stores.runs.active_runs():
            tried += 1
            try:
                results.append(self.reconcile(run_id))
                log_reconciled(results[-1], "tick")
                self.stores.health.record_reconcile_success(run_id)
            except RunNotFoundError:
                tried -= 1  # purged since the query
            except Exception as e:  # noqa: BLE001 - isolation: the other runs go on
                failures.append(e)
                self._reconcile_failed(run_id, e)
        # The heartbeat's own line, logged whatever the runs: its absence is the tick-silence
        # policy's signal (terraform/alerts.tf), so an idle project does not look broken.
        _log("INFO", "ticked", active=tried, reconciled=len(results), failed=len(failures))
        if failures and len(failures) == tried:
            if all(isinstance(e, TRANSIENT_ERRORS) for e in failures):
                raise failures[0]
        return results

    def _reconcile_failed(self, run_id: str, error: Exception) -> None:
        """Log, count and (once per spell) alert one run's failed reconcile; best effort."""
        text = f"{type(error).__name__}: {error}"
        _log("ERROR", "reconcile failed", run=run_id, error=text)
        try:
            # The store puts `run_unhealthy` into the outbox with the count that makes it due;
            # publishing on every failure retries a publish that failed the first time.
            if self.stores.health.record_reconcile_failure(
                run_id, text, self.clock(), UNHEALTHY_AFTER
            ):
                self.outbox.publish(run_id)
        except Exception as e:  # noqa: BLE001 - the store may be what is failing
            _log("ERROR", "reconcile failure not recorded", run=run_id, error=repr(e))

    def watch_tails(
        self,
        published: datetime | None,
        tick_id: str,
        policy: WatchPolicy,
        period_s: float,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Fast advances without Job events (shared.control.advance_watch): after a tick, watch the
        layers about to finish until shortly before the next tick, if this tick (published
        at `published`) is on time and no other tick is watching (the watch lease). Never
        raises: the watch only speeds things up, the tick itself has succeeded."""
        mono, now = monotonic(), self.clock()
        if published is None:  # never from Pub/Sub; a hand-made event: take it as on time
            _log("WARNING", "tick without a publish time: watched as if on time", tick=tick_id)
            published = now
        window = watch_window(published, now, period_s, policy)
        age_s = max(0.0, (now - published).total_seconds())
        if not window.watches:
            _log("INFO", "tail watch skipped", tick=tick_id, reason=window.reason, age_s=age_s)
            return
        holder = uuid.uuid4().hex
        expiry = watch_lease_expiry(published, period_s, policy)
        try:
            acquired = self.stores.watch_leases.acquire_watch_lease(holder, expiry, now)
        except Exception as e:  # noqa: BLE001 - the tick itself has succeeded
            _log("ERROR", "tail watch lease not acquired", tick=tick_id, error=repr(e))
            return
        if not acquired:  # another tick is watching (two deliveries at once)
            _log("INFO", "tail watch skipped", tick=tick_id, reason="busy", age_s=age_s)
            return
        _log("INFO", "tail watch started", tick=tick_id, age_s=age_s, budget_s=window.seconds)
        try:
            self._watch(policy, mono - age_s, monotonic, sleep)
        finally:
            _log("INFO", "tail watch ended", tick=tick_id)  # before the lease is free again
            try:
                self.stores.watch_leases.release_watch_lease(holder)
            except Exception as e:  # noqa: BLE001 - the lease lapses on its own
                _log("ERROR", "tail watch lease not released", tick=tick_id, error=repr(e))

    def _watch(
        self,
        policy: WatchPolicy,
        started: float,
        monotonic: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        """The watch itself, its budget running from `started` (the tick's publish time on
        the monotonic clock)."""

        def reconcile(run_id: str) -> RunState | None:
            try:
                log_reconciled(self.reconcile(run_id), "tail-watch")
                return self.stores.runs.load_run(run_id)
            except Exception as e:  # noqa: BLE001 - the next tick retries this run
                _log("ERROR", "tail-watch reconcile failed", run=run_id, error=repr(e))
                return None

        def hand_off(run_id: str) -> None:
            assert self.kick is not None
            try:
                self.kick(run_id, HANDOFF_ACTION)
                _log("INFO", "tail watch handed off", run=run_id)
            except Exception as e:  # noqa: BLE001 - the next tick reconciles this run
                _log("ERROR", "tail watch hand-off failed", run=run_id, error=repr(e))

        try:
            runs = []
            for run_id in self.stores.runs.active_runs():
                try:
                    runs.append(self.stores.runs.load_run(run_id))
                except RunNotFoundError:  # purged since the query
                    continue
            watch(
                runs,
                self.cluster.get_job,
                reconcile,
                sleep,
                monotonic,
                self.clock,
                policy,
                started,
                hand_off if self.kick is not None else None,
            )
        except Exception as e:  # noqa: BLE001 - the tick itself has succeeded
            _log("ERROR", "tail watch stopped", error=repr(e))

    def tick(
        self, published: datetime | None, tick_id: str, policy: WatchPolicy, period_s: float
    ) -> list[ReconcileResult]:
        """A tick as the function gets it: `on_tick`, then `watch_tails` for the rest of its
        budget (`published`: its Pub/Sub publish time; `tick_id`: the message id)."""
        results = self.on_tick()
        self.watch_tails(published, tick_id, policy, period_s)
        return results

    # ---- kicks --------------------------------------------------------------------------
    def on_kick(self, run_id: str, action: str | None = None) -> ReconcileResult:
        """An operator action (already recorded by the CLI; `action` names it for the log):
        reconcile the run now instead of at the next tick. RunNotFoundError for an unknown
        run (permanent)."""
        result = self.reconcile(run_id)
        log_reconciled(result, "kick", action=action)
        return result


# ---- dead letters ---------------------------------------------------------------------------
def alert_dead_letter(
    publish_json: Callable[..., Any],
    payload: bytes,
    attributes: dict[str, str],
    message_id: str,
    now: datetime,
) -> dict[str, Any]:
    """Publish the `message_dead_lettered` alert (shared.control.dead_letters) for a message a
    trigger failed on, through `publish_json(topic, body, **attributes)`; the body. A publish
    failure raises, so the dead letter is redelivered."""
    body = dead_letters.alert_body(payload, attributes, message_id, now)
    publish_json("alerts", body, **dead_letters.alert_attributes(body))
    log_published_alert(
        log,
        dead_letters.ALERT_KIND,
        body,
        topic=body["topic"],
        function=body["function"],
        subscription=body["subscription"],
        delivery_attempts=body["delivery_attempts"],
        event_id=message_id,
    )
    return body


def log_reconciled(result: ReconcileResult, trigger: str, **fields: Any) -> None:
    """The `reconciled` log line of one reconcile and what triggered it."""
    _log(
        "INFO",
        "reconciled",
        run=result.run_id,
        trigger=trigger,
        status=result.status,
        actions=result.actions,
        stale_retries=result.stale_retries,
        step_s=result.step_s,
        **fields,
    )


def _log(severity: str, message: str, **fields: Any) -> None:
    log_json(log, severity, message, **fields)
