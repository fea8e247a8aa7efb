"""The controller: its triggers wired to one reconciler, its observer and the outbox.

`Controller` is what the functions (functions/main.py) and the local stack run: a plain
composition of the trigger rules of `shared.control.triggers` (Job event, tick and its tail watch,
kick) around the reconcile loop of `shared.control.reconciler` (observe -> plan -> decide ->
dry-run -> finish -> commit -> act -> publish), its observer and its outbox. Every port is
injected here, and each part gets only the role of the run store and of the cluster it uses
(docs/ports-and-wiring.md); the composition root (adapters/wiring.py) passes one store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from shared.control.advance_watch import WatchPolicy
from shared.control.job_events import JobEvent
from shared.control.observe import Observer
from shared.control.outbox import AlertPublisher, Outbox
from shared.control.reconciler import Reconciler, ReconcileResult
from shared.control.triggers import PublishKick, Reconciles, Triggers, TriggerStores
from shared.money.pricing import RateRow, load_rates
from shared.ports.bigtable_monitor import BigtableMonitor
from shared.ports.cluster import Cluster
from shared.ports.graph_table import GraphTableReader
from shared.ports.pod_usage import PodUsageReader
from shared.ports.run_store import RunStore
from shared.reconcile.completeness import DoneMarkerScan
from shared.reconcile.hung_pods import DoneMarkerTimes


def utcnow() -> datetime:
    return datetime.now(UTC)


class Controller:
    """Reconciles runs against the cluster. All I/O goes through the injected adapters;
    `publish_alert` (kind, body) publishes the outbox; `rates` is the Autopilot rate table
    the budget guard prices with (default: packaged); `graph_tables` reads a graph's table
    around its setup passes (docs/setup-passes.md); `done_times` reads the graph table's done
    markers for the hung-pod check; `done_markers` a stage's done markers for a completed
    layer's check (docs/verify.md; None: no check); `bigtable_monitor` the graph's Bigtable
    load, the ramp's gate (docs/bigtable-ramp-and-bill.md; None: no gate); `pod_usage` the
    lifetime usage of finished Jobs' pods where the cluster does not report it
    (docs/canary-and-rightsize.md; None: the cluster's figures only); `wrap_reconciler`
    wraps the reconciler the triggers run (None: the reconciler itself; a benchmark counts
    reconciles with it); `publish_kick` publishes a kick message (run id, action), the tail
    watch's hand-off near the next tick (None: the watch ends at its budget)."""

    def __init__(
        self,
        store: RunStore,
        cluster: Cluster,
        publish_alert: AlertPublisher,
        clock: Callable[[], datetime] = utcnow,
        rates: tuple[RateRow, ...] | None = None,
        graph_tables: GraphTableReader | None = None,
        done_times: DoneMarkerTimes | None = None,
        done_markers: DoneMarkerScan | None = None,
        bigtable_monitor: BigtableMonitor | None = None,
        pod_usage: PodUsageReader | None = None,
        wrap_reconciler: Callable[[Reconciles], Reconciles] | None = None,
        publish_kick: PublishKick | None = None,
    ) -> None:
        self.cluster = cluster
        observer = Observer(
            store,
            cluster,
            clock,
            graph_tables,
            done_times,
            done_markers,
            bigtable_monitor,
            pod_usage,
        )
        self.outbox = Outbox(store, cluster, publish_alert)
        rates = rates if rates is not None else load_rates()
        self.reconciler = Reconciler(store, cluster, observer, self.outbox, rates)
        runs: Reconciles = self.reconciler
        if wrap_reconciler is not None:
            runs = wrap_reconciler(runs)
        stores = TriggerStores(
            runs=store, leases=store, sightings=store, health=store, watch_leases=store
        )
        self.triggers = Triggers(stores, cluster, runs, self.outbox, clock, publish_kick)

    def reconcile(self, run_id: str) -> ReconcileResult:
        """One reconcile of the run (shared.control.reconciler), whatever asked for it."""
        return self.triggers.reconcile(run_id)

    def flush_alerts(self, run_id: str) -> int:
        """Publish the run's outbox now (shared.control.outbox); the number published."""
        return self.outbox.publish(run_id)

    def on_job_event(self, event: JobEvent, max_age_s: float = 3600.0) -> ReconcileResult | None:
        """A Job event (shared.control.triggers.Triggers.on_job_event)."""
        return self.triggers.on_job_event(event, max_age_s)

    def on_tick(self) -> list[ReconcileResult]:
        """The heartbeat: every active run (shared.control.triggers.Triggers.on_tick)."""
        return self.triggers.on_tick()

    def watch_tails(
        self,
        published: datetime | None,
        tick_id: str,
        policy: WatchPolicy,
        period_s: float,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """The tail watch after a tick (shared.control.triggers.Triggers.watch_tails)."""
        self.triggers.watch_tails(published, tick_id, policy, period_s, monotonic, sleep)

    def tick(
        self, published: datetime | None, tick_id: str, policy: WatchPolicy, period_s: float
    ) -> list[ReconcileResult]:
        """A tick as the function gets it: `on_tick`, then `watch_tails`."""
        return self.triggers.tick(published, tick_id, policy, period_s)

    def on_kick(self, run_id: str, action: str | None = None) -> ReconcileResult:
        """An operator action already recorded: reconcile the run now."""
        return self.triggers.on_kick(run_id, action)
