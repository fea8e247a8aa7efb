"""The composition root: the one place that picks an adapter for each port, with one entry
per use (docs/ports-and-wiring.md).

- Cloud Functions: `controller()`, the process-wide controller, built once from the
  environment: `PIPELINE_PROJECT` (else `GOOGLE_CLOUD_PROJECT`) for Firestore and Pub/Sub,
  `PIPELINE_CLUSTER` = `gke` (default; `adapters.gke.cluster`) or `local`.
- In-process functions (the local stack, and tests of the functions): `in_process_functions`,
  for as long as it is open, makes `controller()` talk to a cluster of this process (and read
  the graph's Bigtable load from the local stack's meter).
- The operator CLI: `cli_store` and `cli_bus` (the CLI reads the cluster through
  `scripts.cluster_access.read_cluster`, a `ClusterReader`, never a `JobWriter`).
- `scripts/approve.py`: `approval_store`, the runs role only.
- `pipeline rates update`: `price_catalog`, the Cloud Billing Catalog API.
- `pipeline start`'s CAVE registration: `cave_auth`, sticky_auth.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from adapters.google.firestore_runs import FirestoreRuns
from shared.ports.cluster import Cluster
from shared.reconcile.completeness import DoneMarkerScan

if TYPE_CHECKING:  # loaded by the entries that build them (approve.py needs only Firestore)
    from adapters.google.firestore_store import FirestoreRunStore
    from adapters.google.pubsub_bus import PubSubBus
    from adapters.local.stack import LocalStack
    from shared.control.controller import Controller
    from shared.ports.bigtable_monitor import BigtableMonitor
    from shared.ports.cave_auth import CaveAuth
    from shared.ports.pod_usage import PodUsageReader
    from shared.ports.price_catalog import PriceCatalog
    from shared.reconcile.hung_pods import DoneMarkerTimes

# The default ledger read of a completed layer's check: the graph table's done markers.
LEDGER = "ledger"
DoneMarkers = DoneMarkerScan | None | Literal["ledger"]


class WiringError(RuntimeError):
    """The environment does not say how to reach the project or the cluster."""


_lock = threading.Lock()
# The in-process cluster (`in_process_functions`) and its ledger read, if one is open; the
# controller built for the current wiring (Cloud Functions reuse warm instances).
_cluster: Cluster | None = None
_done_markers: DoneMarkers = LEDGER
_bigtable_monitor: BigtableMonitor | None = None
_pod_usage: PodUsageReader | None = None
_controller: Controller | None = None


def project_from_env() -> str:
    """The project of Firestore and Pub/Sub; WiringError naming the variable to set."""
    project = os.environ.get("PIPELINE_PROJECT") or os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise WiringError("set PIPELINE_PROJECT (the project of Firestore and Pub/Sub)")
    return project


def build_controller(
    project: str,
    cluster: Cluster,
    done_markers: DoneMarkers = LEDGER,
    bigtable_monitor: BigtableMonitor | None = None,
    pod_usage: PodUsageReader | None = None,
) -> Controller:
    """The controller on `cluster`: the run store on Firestore, alerts on Pub/Sub, the graph
    tables and their done markers on Bigtable. `done_markers` is the ledger read of a
    completed layer's check (docs/verify.md): LEDGER reads the graph table; None turns the
    check off (a fake cluster whose Jobs complete without any worker having run).
    `bigtable_monitor` is where the ramp's gate reads the instance's load
    (docs/bigtable-ramp-and-bill.md); None: Cloud Monitoring, unless an emulator stands in.
    `pod_usage` is where finished pods' lifetime usage is read; None: Cloud Monitoring's
    container metrics for a GKE cluster."""
    from adapters.bigtable.graph_meta_store import BigtableGraphTables
    from adapters.bigtable.ledger_scan import scan_done_markers
    from adapters.google.alert_publisher import PubSubAlertPublisher
    from adapters.google.firestore_store import FirestoreRunStore
    from adapters.google.pubsub_bus import PubSubBus
    from shared.control.controller import Controller

    if done_markers == LEDGER:
        done_markers = scan_done_markers
    return Controller(
        FirestoreRunStore(project),
        cluster,
        PubSubAlertPublisher(PubSubBus(project)),
        graph_tables=BigtableGraphTables(),
        done_times=_done_times(),
        done_markers=done_markers,
        bigtable_monitor=bigtable_monitor or _bigtable_monitor_from_env(),
        pod_usage=pod_usage or _pod_usage_for(project, cluster),
    )


def controller() -> Controller:
    """The Cloud Functions' entry: the process-wide controller (built once)."""
    global _controller
    with _lock:
        if _controller is None:
            cluster = _cluster if _cluster is not None else _cluster_from_env()
            _controller = build_controller(
                project_from_env(), cluster, _done_markers, _bigtable_monitor, _pod_usage
            )
        return _controller


@contextmanager
def in_process_functions(
    cluster: Cluster,
    done_markers: DoneMarkers = LEDGER,
    bigtable_monitor: BigtableMonitor | None = None,
    pod_usage: PodUsageReader | None = None,
) -> Iterator[None]:
    """The local stack's entry (and the functions' tests'): while open, `controller()` talks
    to `cluster`, a cluster of this process, with `done_markers` as its ledger read and
    `bigtable_monitor` as the gate's load and `pod_usage` as the pods' lifetime usage (see
    `build_controller`). On exit the wiring is what it was before."""
    global _cluster, _done_markers, _bigtable_monitor, _pod_usage, _controller
    with _lock:
        saved = _cluster, _done_markers, _bigtable_monitor, _pod_usage
        _cluster, _done_markers = cluster, done_markers
        _bigtable_monitor, _pod_usage = bigtable_monitor, pod_usage
        _controller = None
    try:
        yield
    finally:
        with _lock:
            (_cluster, _done_markers, _bigtable_monitor, _pod_usage), _controller = saved, None


def local_stack(*args: Any, **kwargs: Any) -> LocalStack:
    """The local stack (`pipeline local up`, the demo, benches, end-to-end tests), whose
    functions run in this process through `in_process_functions`; the arguments are
    `LocalStack`'s."""
    from adapters.local.stack import LocalStack

    return LocalStack(*args, host_functions=in_process_functions, **kwargs)


def price_catalog(api_key: str = "", root: str = "") -> PriceCatalog:
    """`pipeline rates update`'s catalog: the Cloud Billing Catalog API with an API key when
    one is given (a plain session), else Application Default Credentials; `root` another
    endpoint (a test's server)."""
    from adapters.google.billing_catalog import ROOT, BillingCatalog

    if api_key or root:
        import requests

        return BillingCatalog(requests.Session(), root or ROOT, api_key)
    from adapters.common.rest import default_sessions

    session, _, _ = default_sessions()
    return BillingCatalog(session)


def cave_auth() -> CaveAuth:
    """`pipeline start`'s CAVE registration: sticky_auth over a `requests` session."""
    import requests

    from adapters.cave.sticky_auth import StickyAuth

    return StickyAuth(requests.Session())


def cli_store(project: str) -> FirestoreRunStore:
    """The operator CLI's run store: runs and their history, and the alerts they raised."""
    from adapters.google.firestore_store import FirestoreRunStore

    return FirestoreRunStore(project)


def cli_bus(project: str) -> PubSubBus:
    """The operator CLI's Pub/Sub: it publishes kicks (the controller acts on them)."""
    from adapters.google.pubsub_bus import PubSubBus

    return PubSubBus(project)


def approval_store(project: str) -> FirestoreRuns:
    """`scripts/approve.py`'s store: the runs role, which `pipeline approve` writes too."""
    return FirestoreRuns(project)


def _cluster_from_env() -> Cluster:
    kind = os.environ.get("PIPELINE_CLUSTER", "gke")
    if kind == "gke":
        from adapters.gke.cluster import GkeCluster  # kubernetes client: cloud only

        return GkeCluster.from_env()
    raise WiringError(
        f"PIPELINE_CLUSTER={kind!r} but no cluster is registered in this process: "
        "the local stack's functions run inside `pipeline local up` / `pipeline demo`"
    )


def _done_times() -> DoneMarkerTimes | None:
    """The graph tables' done markers for the hung-pod check, where the Bigtable client is
    installed (the `controller` extra has it); without it the check reads pod logs only."""
    try:
        from adapters.bigtable.done_times import BigtableDoneTimes
    except ImportError:
        return None
    return BigtableDoneTimes()


def _bigtable_monitor_from_env() -> BigtableMonitor | None:
    """Cloud Monitoring, except against an emulator (which Monitoring knows nothing of: no
    gate)."""
    if os.environ.get("BIGTABLE_EMULATOR_HOST"):
        return None
    from adapters.google.monitoring import CloudMonitoring

    return CloudMonitoring()


def _pod_usage_for(project: str, cluster: Cluster) -> PodUsageReader | None:
    """Cloud Monitoring's container metrics for a GKE cluster's pods (in the project of the
    controller, which terraform grants roles/monitoring.viewer); none for any other cluster
    (the local stack hands in the process kubelet's, `in_process_functions`)."""
    gke = sys.modules.get("adapters.gke.cluster")  # loaded only where a GKE cluster is
    if gke is None or not isinstance(cluster, gke.GkeCluster):
        return None
    from adapters.google.pod_usage import CloudPodUsage

    return CloudPodUsage(project, cluster.namespace)


@functools.lru_cache(maxsize=4)
def _bus(project: str) -> PubSubBus:
    from adapters.google.pubsub_bus import PubSubBus

    return PubSubBus(project)


def alerts_bus() -> PubSubBus:
    """The Pub/Sub client alerts are published with (one per project; warm instances reuse
    it)."""
    return _bus(project_from_env())
