"""The composition root: the one place that picks an adapter for each port, with one entry
per use (docs/ports-and-wiring.md).

- Cloud Functions: `controller()`, the process-wide controller, built once from the
  environment: `PIPELINE_PROJECT` (else `GOOGLE_CLOUD_PROJECT`) for Firestore and Pub/Sub,
  `PIPELINE_CLUSTER` = `gke` (default; `adapters.gke.cluster`) or `local`.
- In-process functions (the local stack, and tests of the functions): `in_process_functions`,
  for as long as it is open, makes `controller()` talk to a cluster of this process (and read
  the graph's Bigtable load from the local stack's meter).
- The operator CLI: `cli_services()`, a `CliServices` bundle, each member a port of
  `shared/ports` (or the doctor's facts) built on first use: the run records, the kick, a
  `ClusterReader` (never a `JobWriter`), the Secret writer of `pipeline setup`, the ledger's
  reads, the graph tables, the doctor's facts. `scripts` imports no other adapter module
  (pyproject's `cli-through-the-wiring` contract; the local-stack commands are its named
  exceptions). `local_stack` builds the local stack with its functions hosted here.
- `scripts/approve.py`: `approval_store`, the runs role only.
- `pipeline rates update`: `price_catalog`, the Cloud Billing Catalog API.
- `pipeline start`'s CAVE registration: `cave_auth`, sticky_auth.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

# Errors and the probe the CLI uses through this module (its exit codes: scripts/exits.py).
from adapters.common.emulator_probe import EmulatorUnreachableError, check_emulators  # noqa: F401
from adapters.common.rest import ServiceUnreachable  # noqa: F401
from shared.ports.cluster import Cluster, ClusterReader
from shared.reconcile.completeness import DoneMarkerScan

if TYPE_CHECKING:  # loaded by the entries that build them (the CLI's --help needs no client)
    from adapters.google.firestore_runs import FirestoreRuns
    from adapters.google.firestore_store import FirestoreRunStore
    from adapters.google.pubsub_bus import PubSubBus
    from adapters.local.rate_table import RateTableFiles
    from adapters.local.stack import LocalStack
    from shared.config.config import PipelineConfig
    from shared.control.controller import Controller
    from shared.doctor.checks import Check
    from shared.doctor.deployment import Deployment
    from shared.doctor.verdicts import CheckResult
    from shared.ports.bigtable_monitor import BigtableMonitor
    from shared.ports.cave_auth import CaveAuth
    from shared.ports.graph_table import GraphTableReader
    from shared.ports.message_bus import JsonPublisher
    from shared.ports.pod_usage import PodUsageReader
    from shared.ports.price_catalog import PriceCatalog
    from shared.ports.secret_writer import SecretWriter
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
    bus = PubSubBus(project)

    def publish_kick(run_id: str, action: str) -> None:
        # The tail watch's hand-off (shared.control.advance_watch): on_kick reconciles it.
        # Within the watch's last margin, so the tick still ends before the next one.
        bus.publish_json("kick", {"run_id": run_id, "action": action}, timeout_s=2.0)

    return Controller(
        FirestoreRunStore(project),
        cluster,
        PubSubAlertPublisher(bus),
        graph_tables=BigtableGraphTables(),
        done_times=_done_times(),
        done_markers=done_markers,
        bigtable_monitor=bigtable_monitor or _bigtable_monitor_from_env(),
        pod_usage=pod_usage or _pod_usage_for(project, cluster),
        publish_kick=publish_kick,
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
    from adapters.google.firestore_runs import FirestoreRuns

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


# -- the operator CLI ----------------------------------------------------------------------

Fetchers = Mapping[str, Callable[[], dict]]
Env = Mapping[str, str]


@dataclass(frozen=True)
class CliServices:
    """The operator CLI's seams, one per port: every member builds its adapter when called,
    so a command loads only the clients it uses (the Google clients are the `controller`
    extra). Tests hand the commands a bundle of fakes instead."""

    # The run records (runs, their history, the alerts they raised) of a project.
    run_store: Callable[[str], FirestoreRunStore]
    # The kick's publisher of a project (the controller acts on a kick).
    kick_bus: Callable[[str], JsonPublisher]
    # When an event the cluster reader handed out last happened (Kubernetes' event fields).
    event_time: Callable[[Mapping[str, Any]], datetime]
    # The cluster the CLI reads: (namespace, kubeconfig) of a local stack, or (None, None,
    # env) for GKE from the environment (`GkeCluster.from_env`).
    cluster_reader: Callable[..., ClusterReader]
    # `pipeline setup`'s Secret, written to the cluster chosen as for `cluster_reader`.
    secret_writer: Callable[..., SecretWriter]
    # The ledger's reads: the chunks of (cfg, stage, chunk ids) marked done; the done-marker
    # scan of a completed layer's check (docs/verify.md).
    done_among: Callable[[PipelineConfig, str, Iterable[int]], set[int]]
    done_markers: DoneMarkerScan
    # The graph's tables: create one if missing (table id, project, instance); read one.
    ensure_table: Callable[[str, str, str], None]
    graph_tables: Callable[[], GraphTableReader]
    # The doctor's facts: (cfg, deployment, env, stack env) -> the fetchers of its checks,
    # the emulators' when `is_local(env)`; `run_checks` runs checks on them.
    is_local: Callable[[Mapping[str, str]], bool]
    doctor_facts: Callable[
        [PipelineConfig, Deployment, Mapping[str, str], Mapping[str, str]], Fetchers
    ]
    run_checks: Callable[..., list[CheckResult]]
    local_path_facts: Callable[..., dict]
    # `pipeline bill`'s Bigtable load (None against an emulator), `pipeline rates`' files and
    # catalog, `pipeline start`'s CAVE registration, `pipeline purge`'s Firestore admin.
    bigtable_monitor: Callable[[], BigtableMonitor | None]
    rate_tables: Callable[[Path | None], RateTableFiles]
    price_catalog: Callable[..., PriceCatalog]
    cave_auth: Callable[[], CaveAuth]
    purge_run: Callable[..., object]
    run_job_names: Callable[..., list[str]]


def cli_services() -> CliServices:
    """The operator CLI's entry: the bundle on Firestore, Pub/Sub, GKE's API (a local stack's
    Kubernetes through the same adapter), Bigtable and Google's REST APIs."""
    return CliServices(
        run_store=cli_store,
        kick_bus=cli_bus,
        event_time=_event_time,
        cluster_reader=_cli_cluster,
        secret_writer=_cli_cluster,
        done_among=_done_among,
        done_markers=_scan_done_markers,
        ensure_table=_ensure_table,
        graph_tables=_graph_tables,
        is_local=_is_local,
        doctor_facts=_doctor_facts,
        run_checks=_run_checks,
        local_path_facts=_local_path_facts,
        bigtable_monitor=_bigtable_monitor_from_env,
        rate_tables=_rate_tables,
        price_catalog=price_catalog,
        cave_auth=cave_auth,
        purge_run=_purge_run,
        run_job_names=_run_job_names,
    )


def register_config_readers() -> None:
    """Let the config loader read a precomputed volume's gs:// `info` (the CLI's configs)."""
    from adapters.google import info_reader  # noqa: F401 - importing it registers it


def _cli_cluster(
    namespace: str | None = None,
    config_file: str | None = None,
    env: Mapping[str, str] | None = None,
):  # noqa: ANN202 - a GkeCluster: a ClusterReader and a SecretWriter
    """A local stack's Kubernetes by its kubeconfig, else GKE from `env`; ImportError when
    the kubernetes client is not installed (the CLI names the extra)."""
    from adapters.gke.cluster import GkeCluster

    if config_file is not None:
        return GkeCluster.from_kubeconfig(namespace=namespace, config_file=config_file)
    return GkeCluster.from_env(env)


def _event_time(event: Mapping[str, Any]) -> datetime:
    from adapters.gke.wire import event_time

    return event_time(event)


def _done_among(cfg: PipelineConfig, stage: str, chunk_ids: Iterable[int]) -> set[int]:
    from datetime import timedelta

    from adapters.bigtable.chunk_ledger import (
        BigtableChunkLedger,
        close_bigtable_client,
        open_bigtable_client,
    )

    client = open_bigtable_client(
        cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance, timedelta(minutes=1)
    )
    try:
        return BigtableChunkLedger(client, stage).done_among(chunk_ids)
    finally:
        close_bigtable_client(client)


def _scan_done_markers(*args: Any, **kwargs: Any) -> Any:
    from adapters.bigtable.ledger_scan import scan_done_markers

    return scan_done_markers(*args, **kwargs)


def _ensure_table(table_id: str, project: str, instance: str) -> None:
    from adapters.bigtable.chunk_ledger import ensure_table

    ensure_table(table_id, project, instance)


def _graph_tables() -> GraphTableReader:
    from adapters.bigtable.graph_meta_store import BigtableGraphTables

    return BigtableGraphTables()


def _is_local(env: Mapping[str, str]) -> bool:
    from adapters.doctor.local import is_local

    return is_local(env)


def _doctor_facts(
    cfg: PipelineConfig, dep: Deployment, env: Mapping[str, str], stack: Mapping[str, str]
) -> Fetchers:
    """The fetchers of the doctor's checks: the emulators' when `env` names them (with the
    topics and subscriptions of the stack `stack` describes, if it is the one `env` names),
    else Google's REST APIs and the graph table's metadata."""
    if _is_local(env):
        from adapters.doctor.local import LocalFacts

        if stack and stack.get("PIPELINE_PROJECT") == env.get("PIPELINE_PROJECT"):
            # a stack runs here: it has its topics and its functions' subscriptions
            from adapters.google.pubsub_bus import TOPICS
            from adapters.local.stack import ROUTES

            topics = tuple(TOPICS)
            # job-events has no function on a stack started without Job events
            subscriptions = tuple(s for s, (_, fn) in ROUTES.items() if fn != "on_job_event")
        else:  # emulators only: what the CLI itself publishes to
            topics, subscriptions = ("kick",), ()
        return LocalFacts(cfg, dep, env, topics, subscriptions).fetchers()
    from adapters.common.rest import RestApi, default_sessions
    from adapters.doctor.cloud import CloudFacts

    session, public, who = default_sessions()

    def read_meta() -> object:
        from datetime import timedelta

        from adapters.bigtable.client import close_bigtable_client, open_bigtable_client

        client = open_bigtable_client(
            cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance, timedelta(minutes=1)
        )
        try:
            return client.read_table_meta()
        finally:
            close_bigtable_client(client)

    return CloudFacts(cfg, dep, RestApi(session), RestApi(public), who, read_meta).fetchers()


def _run_checks(checks: list[Check], *args: Any, **kwargs: Any) -> list[CheckResult]:
    from adapters.doctor.runner import run_checks

    return run_checks(checks, *args, **kwargs)


def _local_path_facts(*args: Any, **kwargs: Any) -> dict:
    from adapters.doctor.cloud import local_path_facts

    return local_path_facts(*args, **kwargs)


def _rate_tables(folder: Path | None) -> RateTableFiles:
    from adapters.local.rate_table import RateTableFiles, packaged_folder

    return RateTableFiles(folder or packaged_folder())


def _purge_run(*args: Any, **kwargs: Any) -> object:
    from adapters.google.firestore_admin import purge_run

    return purge_run(*args, **kwargs)


def _run_job_names(*args: Any, **kwargs: Any) -> list[str]:
    from adapters.google.firestore_admin import run_job_names

    return run_job_names(*args, **kwargs)
