"""Builds the controller's adapters from the environment (Cloud Functions and local stack).

Env: `PIPELINE_PROJECT` (else `GOOGLE_CLOUD_PROJECT`) for Firestore and Pub/Sub;
`PIPELINE_CLUSTER` = `gke` (default; see shared.adapters.gke.cluster) or `local` (the local
stack registers its in-process cluster with `use_cluster`).
"""

from __future__ import annotations

import functools
import os
import threading

from shared.adapters.bigtable.graph_meta_store import BigtableGraphTables
from shared.adapters.bigtable.ledger_scan import scan_done_markers
from shared.adapters.google.firestore_store import FirestoreRunStore
from shared.adapters.google.pubsub_bus import PubSubBus
from shared.cluster import Cluster
from shared.completeness import DoneMarkerScan
from shared.controller import Controller
from shared.hung_pods import DoneMarkerTimes


class WiringError(RuntimeError):
    """The environment does not say how to reach the project or the cluster."""


_lock = threading.Lock()
_cluster: Cluster | None = None
_controller: Controller | None = None
_done_markers: DoneMarkerScan | None = scan_done_markers


def use_cluster(
    cluster: Cluster | None, done_markers: DoneMarkerScan | None = scan_done_markers
) -> None:
    """Register the cluster the controller talks to (the local stack's, in-process), and
    the ledger read of its completeness check (docs/verify.md): None turns the check off,
    for a fake cluster whose Jobs complete without any worker having run."""
    global _cluster, _controller, _done_markers
    with _lock:
        _cluster, _controller, _done_markers = cluster, None, done_markers


def project_from_env() -> str:
    project = os.environ.get("PIPELINE_PROJECT") or os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise WiringError("set PIPELINE_PROJECT (the project of Firestore and Pub/Sub)")
    return project


def _cluster_from_env() -> Cluster:
    if _cluster is not None:
        return _cluster
    kind = os.environ.get("PIPELINE_CLUSTER", "gke")
    if kind == "gke":
        from shared.adapters.gke.cluster import GkeCluster  # kubernetes client: cloud only

        return GkeCluster.from_env()
    raise WiringError(
        f"PIPELINE_CLUSTER={kind!r} but no cluster is registered in this process: "
        "the local cluster runs inside `pipeline local up` / `pipeline demo`"
    )


def _done_times() -> DoneMarkerTimes | None:
    """The graph tables' done markers for the hung-pod check, where the Bigtable client is
    installed (the `controller` extra has it); without it the check reads pod logs only."""
    try:
        from shared.adapters.bigtable.done_times import BigtableDoneTimes
    except ImportError:
        return None
    return BigtableDoneTimes()


@functools.lru_cache(maxsize=4)
def _bus(project: str) -> PubSubBus:
    return PubSubBus(project)


def alerts_bus() -> PubSubBus:
    """The Pub/Sub client alerts are published with (one per project; warm instances reuse
    it)."""
    return _bus(project_from_env())


def controller() -> Controller:
    """The process-wide controller (built once; Cloud Functions reuse warm instances)."""
    global _controller
    with _lock:
        if _controller is None:
            project = project_from_env()
            bus = PubSubBus(project)
            _controller = Controller(
                FirestoreRunStore(project),
                _cluster_from_env(),
                lambda kind, body: bus.publish_json(
                    "alerts", body, kind=kind, alert_id=str(body.get("alert_id", ""))
                ),
                graph_tables=BigtableGraphTables(),
                done_times=_done_times(),
                done_markers=_done_markers,  # a completed layer's check (docs/verify.md)
            )
        return _controller
