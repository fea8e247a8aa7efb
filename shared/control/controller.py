"""The controller: its triggers wired to one reconciler, its observer and the outbox.

`Controller` is what the functions (functions/main.py) and the local stack run: the trigger
rules of `shared.control.triggers` (Job event, tick and its tail watch, kick) around the reconcile
loop of `shared.control.reconciler` (observe -> plan -> decide -> dry-run -> reject -> commit -> act
-> publish), with every port injected here (docs/controller.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from shared.control.observe import Observer
from shared.control.outbox import AlertPublisher, Outbox
from shared.control.reconciler import Reconciler
from shared.control.triggers import Triggers
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


class Controller(Triggers):
    """Reconciles runs against the cluster. All I/O goes through the injected adapters;
    `publish_alert` (kind, body) publishes the outbox; `rates` is the Autopilot rate table
    the budget guard prices with (default: packaged); `graph_tables` reads a graph's table
    around its setup passes (docs/setup-passes.md); `done_times` reads the graph table's done
    markers for the hung-pod check; `done_markers` a stage's done markers for a completed
    layer's check (docs/verify.md; None: no check); `bigtable_monitor` the graph's Bigtable
    load, the ramp's gate (docs/bigtable-ramp-and-bill.md; None: no gate); `pod_usage` the
    lifetime usage of finished Jobs' pods where the cluster does not report it
    (docs/canary-and-rightsize.md; None: the cluster's figures only)."""

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
    ) -> None:
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
        outbox = Outbox(store, cluster, publish_alert)
        rates = rates if rates is not None else load_rates()
        reconciler = Reconciler(store, cluster, observer, outbox, rates)
        super().__init__(store, cluster, reconciler, outbox, clock)
