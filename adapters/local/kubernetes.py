"""Local Kubernetes: the real control plane (`controlplane/`), RBAC as terraform deploys it
(`controlplane/identities.py`) and the process kubelet (`kubelet/`) serving a few Nodes shaped
like GKE Autopilot's. Clients reach it through the GKE adapter with a kubeconfig, as they
reach GKE: `admin.kubeconfig` (the stack itself, and chaos), `controller.kubeconfig` (the
controller's service account), `operator.kubeconfig` (the CLI's).

    with LocalKubernetes(folder) as kube:
        cluster = GkeCluster.from_kubeconfig(config_file=str(kube.controller_kubeconfig), ...)
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.local.controlplane import metrics_server
from adapters.local.controlplane.build import (
    BuildError,
    binary_path,
    kubernetes_version,
    metrics_server_manifests,
)
from adapters.local.controlplane.control_plane import ControlPlane, ControlPlaneError
from adapters.local.controlplane.identities import (
    Identities,
    apply,
    service_account_token,
    set_up,
)
from adapters.local.kube_api import KubeApi
from adapters.local.kubelet.kubelet import Hollow, ProcessKubelet
from adapters.local.kubelet.node import NodeSpec
from adapters.local.process_groups import free_port

log = logging.getLogger("cave_pipeline.local_kubernetes")
NODE_RETRY_S = 5.0  # between attempts to delete a lost node (and add its replacement)

__all__ = ["BuildError", "ControlPlaneError", "LocalKubernetes", "default_nodes"]


def default_nodes(
    cpu: float = 4.0, memory_gib: float = 16.0, zone: str = "local-a"
) -> list[NodeSpec]:
    """Two Spot nodes sharing `cpu`/`memory_gib`, and one on-demand node of the same size as
    one of them (setup pods and anything without the Spot toleration)."""
    half_cpu, half_mem = cpu / 2, memory_gib / 2
    return [
        NodeSpec("gk3-local-spot-1", half_cpu, half_mem, spot=True, zone=zone),
        NodeSpec("gk3-local-spot-2", half_cpu, half_mem, spot=True, zone=zone),
        NodeSpec("gk3-local-pool-1", half_cpu, half_mem, spot=False, zone=zone),
    ]


@dataclass
class LocalKubernetes:
    """The control plane, the identities and the process kubelet; stopped together."""

    state_dir: Path
    namespace: str = "cave-pipeline"  # terraform's, and pipeline.yml's default
    nodes: list[NodeSpec] = field(default_factory=default_nodes)
    extra_env: dict[str, str] = field(default_factory=dict)
    hollow: Hollow | None = None
    node_monitor_grace: float | None = None
    api_qps: int | None = None  # ControlPlane.api_qps: the scale bench's setting only
    control_plane_env: dict[str, str] = field(default_factory=dict)
    control_plane: ControlPlane | None = None
    kubelet: ProcessKubelet | None = None
    identities: Identities | None = None
    admin: KubeApi | None = None
    started_s: float = 0.0
    # A lost node's Node object goes this long after the loss (GKE deletes a reclaimed Spot
    # VM's Node within a minute or two); pod GC then fails its pods.
    node_delete_after_s: float = 60.0
    # A lost node's zombies (`lose_node(keep_running=True)`) end this long after its Node is
    # deleted: GKE's node repair recreates the VM in the end, and a hung zombie must not
    # renew its chunk's claim for ever (a chaos run's layer 2 failed on one attempt after
    # another that way).
    zombie_outlives_node_s: float = 120.0
    _replacements: int = 0
    # API outages are played by one thread that lives until stop(): the restarted API server
    # dies with the thread that started it (process_groups.dying_with_parent).
    _outages: queue.Queue[float | None] = field(default_factory=queue.Queue)
    _outage_thread: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    outages_played: int = 0

    def __enter__(self) -> LocalKubernetes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalKubernetes:
        """Start everything; on any failure or interruption, stop what was started."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> LocalKubernetes:
        t0 = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.control_plane = ControlPlane(
            self.state_dir / "control-plane",
            binary_path(),
            node_monitor_grace=self.node_monitor_grace,
            api_qps=self.api_qps,
            extra_env=self.control_plane_env,
        )
        self.control_plane.start()
        self.admin = KubeApi.from_kubeconfig(self.control_plane.kubeconfig("admin"))
        self._wait_for_default_namespace()
        self.identities = set_up(self.admin, self.control_plane, self.namespace)
        self.kubelet = ProcessKubelet(
            self.admin,
            self.nodes,
            self.state_dir / "kubelet",
            extra_env=self.extra_env,
            hollow=self.hollow,
            kubelet_version=kubernetes_version(),
        )
        self.kubelet.start()
        self._start_metrics_server()
        self._wait_for_service_account()
        self.started_s = time.monotonic() - t0
        log.info("local Kubernetes ready in %.1f s at %s", self.started_s, self.server)
        return self

    def _start_metrics_server(self) -> None:
        """metrics-server under upstream's RBAC and APIService; not waited for (as on GKE,
        `metrics.k8s.io` answers once it has scraped each node twice, about 30 s)."""
        assert self.control_plane is not None and self.admin is not None
        port = free_port()
        manifests = metrics_server_manifests(self.control_plane.binary)
        apply(self.admin, metrics_server.objects(manifests, port))
        token = service_account_token(self.admin, metrics_server.NAMESPACE, metrics_server.NAME)
        kubeconfig = self.control_plane.write_kubeconfig(
            metrics_server.NAME, token, metrics_server.NAMESPACE
        )
        self.control_plane.start_metrics_server(kubeconfig, port)

    def metrics_available(self) -> bool:
        """True once the aggregator reports metrics.k8s.io Available."""
        assert self.admin is not None
        found = self.admin.request(
            "GET",
            f"/apis/apiregistration.k8s.io/v1/apiservices/{metrics_server.API_SERVICE}",
            ok=(404,),
        )
        return metrics_server.available(found)

    def stop(self) -> None:
        if self._outage_thread is not None:
            self._stopping.set()  # an outage under way ends without its restart
            self._outages.put(None)
            self._outage_thread.join(timeout=30)
            self._outage_thread = None
        if self.kubelet is not None:
            self.kubelet.stop()
            self.kubelet = None
        if self.control_plane is not None:
            self.control_plane.stop()
            self.control_plane = None

    @property
    def server(self) -> str:
        assert self.control_plane is not None
        return self.control_plane.server

    @property
    def admin_kubeconfig(self) -> Path:
        assert self.control_plane is not None
        return self.control_plane.kubeconfig("admin")

    @property
    def controller_kubeconfig(self) -> Path:
        assert self.identities is not None
        return self.identities.controller

    @property
    def operator_kubeconfig(self) -> Path:
        assert self.identities is not None
        return self.identities.operator

    def pids(self) -> dict[str, int]:
        return self.control_plane.pids() if self.control_plane else {}

    def evict(self, pod_name: str) -> bool:
        """Preempt a pod through the Eviction API (Kubernetes writes DisruptionTarget,
        EvictionByEvictionAPI, and deletes it gracefully); False if it is gone."""
        assert self.admin is not None
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod_name, "namespace": self.namespace},
        }
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod_name}/eviction"
        return self.admin.request("POST", path, body, ok=(404,)) is not None

    # -- faults through Kubernetes' own mechanisms (docs/chaos.md) -----------------------------

    def preempt_pod(self, name: str) -> bool:
        """A Spot reclaim of one pod: the Eviction API (see `evict`)."""
        return self.evict(name)

    def kill_pod(self, name: str) -> bool:
        """SIGKILL a running pod's container (exit 137, a counted failure)."""
        assert self.kubelet is not None
        return self.kubelet.kill_container(name)

    def evict_pod(self, name: str, resource: str = "memory") -> bool:
        """The kubelet's node-pressure eviction of a running pod (no grace, DisruptionTarget
        TerminationByKubelet, reason Evicted)."""
        assert self.kubelet is not None
        message = f"The node was low on resource: {resource}. "
        return self.kubelet.evict(self.namespace, name, message)

    def preempt_random_pod(self, rng: random.Random | None = None) -> str | None:
        """Preempt a random running pod; its name, or None if none runs."""
        assert self.kubelet is not None
        running = sorted(self.kubelet.running_pods())
        if not running:
            return None
        name = (rng or random).choice(running)[0]
        return name if self.preempt_pod(name) else None

    def lose_node(self, pod_names: list[str], keep_running: bool = False) -> list[str]:
        """Lose the nodes under these pods, as a Spot VM reclaimed without notice: their
        kubelet stops renewing the Lease and writing status, so the node lifecycle controller
        marks them NotReady and taints them; `keep_running` leaves their processes going
        (zombies, cut off from the API, not from Bigtable) until `zombie_outlives_node_s`
        after their Node's deletion (as GKE's node repair recreates the VM; a hung zombie must not
        hold its chunk's claim for ever), else they end with the VM. After
        `node_delete_after_s` the Node is deleted, as GKE deletes a reclaimed VM's Node, so pod
        GC fails its pods and their Jobs replace them; a fresh node takes its place. Returns
        the pods lost."""
        assert self.kubelet is not None
        nodes = {n for n in (self.kubelet.node_of(p) for p in pod_names) if n}
        lost: list[str] = []
        for node in sorted(nodes):
            lost += self.kubelet.lose_node(node)
            if not keep_running:
                self.kubelet.kill_node(node)
            else:  # the partitioned VM is repaired (recreated) in the end: its zombies go
                vm_gone = threading.Timer(
                    self.node_delete_after_s + self.zombie_outlives_node_s,
                    self.kubelet.kill_node,
                    args=(node,),
                )
                vm_gone.daemon = True
                vm_gone.start()
            timer = threading.Timer(self.node_delete_after_s, self._replace_node, args=(node,))
            timer.daemon = True
            timer.start()
        return lost

    def api_outage(self, down_s: float) -> None:
        """An API outage, now, in the background: the API server is stopped, stays down for
        `down_s` and starts again on its port (`ControlPlane.restart_apiserver`). Every client
        meets refused connections meanwhile: the controller's calls fail as
        `ClusterUnreachableError`, the kubelet and the controller manager retry."""
        if self._outage_thread is None:
            self._outage_thread = threading.Thread(
                target=self._play_outages, name="api-outages", daemon=True
            )
            self._outage_thread.start()
        self._outages.put(down_s)

    def _play_outages(self) -> None:
        while (down_s := self._outages.get()) is not None:
            try:
                assert self.control_plane is not None
                if self.control_plane.restart_apiserver(down_s, self._stopping):
                    self.outages_played += 1
            except Exception as e:  # noqa: BLE001 - the stack may be stopping
                log.warning("API outage: %s", e)

    def _replace_node(self, name: str) -> None:
        """Delete a lost node's Node and add a fresh node, as GKE does for a reclaimed Spot
        VM, retrying every NODE_RETRY_S until both are done or the stack stops: a delete that
        meets an API outage must not leave the node's pods terminating for good (the
        controller waits for a retired Job's pods to be gone before it re-creates it)."""
        assert self.admin is not None and self.kubelet is not None
        spec = next(n for n in self.nodes if n.name == name)
        while not self._stopping.is_set():
            try:
                self.admin.request("DELETE", f"/api/v1/nodes/{name}", ok=(404,))
                break
            except Exception as e:  # noqa: BLE001 - an API outage: GKE retries too
                log.warning("deleting lost node %s: %s; retrying in %.0f s", name, e, NODE_RETRY_S)
                self._stopping.wait(NODE_RETRY_S)
        self._replacements += 1
        fresh = dataclasses.replace(spec, name=f"{spec.name}-r{self._replacements}")
        while not self._stopping.is_set():
            try:
                self.kubelet.add_node(fresh)
                log.info("node %s deleted; %s takes its place", name, fresh.name)
                return
            except Exception as e:  # noqa: BLE001 - an API outage: GKE retries too
                log.warning("adding a node for %s: %s; retrying in %.0f s", name, e, NODE_RETRY_S)
                self._stopping.wait(NODE_RETRY_S)

    def _wait_for_default_namespace(self) -> None:
        assert self.admin is not None
        deadline = time.monotonic() + 30
        while self.admin.request("GET", "/api/v1/namespaces/default", ok=(404,)) is None:
            if time.monotonic() > deadline:
                raise ControlPlaneError("the API server made no default namespace in 30 s")
            time.sleep(0.1)

    def _wait_for_service_account(self) -> None:
        """Pods cannot be created in a namespace before its `default` ServiceAccount exists
        (the ServiceAccount admission plugin); the serviceaccount controller makes it."""
        assert self.admin is not None
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/default"
        deadline = time.monotonic() + 30
        while self.admin.request("GET", path, ok=(404,)) is None:
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    "the controller manager made no default ServiceAccount in 30 s; see "
                    f"{self.state_dir / 'control-plane' / 'kube-controller-manager.log'}"
                )
            time.sleep(0.1)

    def job_status_writers(self, namespace: str | None = None) -> dict[str, int]:
        """The managers that wrote the Jobs' status (from managedFields), with counts."""
        assert self.admin is not None
        ns = namespace or self.namespace
        jobs = self.admin.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs")
        out: dict[str, int] = {}
        for job in jobs.get("items") or []:
            for entry in job["metadata"].get("managedFields") or []:
                if entry.get("subresource") == "status":
                    out[entry["manager"]] = out.get(entry["manager"], 0) + 1
        return out

    def summary(self) -> dict[str, Any]:
        """What `pipeline demo --json` reports as `cluster`."""
        assert self.admin is not None
        version = self.admin.request("GET", "/version")
        nodes = self.admin.request("GET", "/api/v1/nodes")
        return {
            "server_version": version.get("gitVersion"),
            "nodes": [n["metadata"]["name"] for n in nodes.get("items") or []],
            "job_status_writers": sorted(self.job_status_writers()),
        }
