"""The process kubelet: the node side of the local cluster, the one part of it written here.

It registers Nodes (`node.py`), renews their Leases, watches the pods the scheduler binds to
them, and runs each pod's container as a local process (`container.py`), writing pod status
as the kubelet's status manager does (`pod_status.py`: strategic-merge patches, so conditions
others own stay). Graceful deletion as the kubelet does it: on `deletionTimestamp`, SIGTERM,
the grace period, SIGKILL, the terminal phase, then DELETE with grace 0 and a UID precondition;
it never touches the Job controller's `batch.kubernetes.io/job-tracking` finalizer. Logs are
served on each Node's kubelet port (`log_server.py`), so `kubectl logs` and the GKE adapter's
log reads go through the API server as on GKE.

Every 10 s, beside the Lease, it checks its Node as the kubelet's status loop would: a Ready
condition the node lifecycle controller set to Unknown during an API outage longer than its
grace period is posted Ready again (which lifts the taints), and a deleted Node is registered
anew. Faults the kubelet itself causes, as on GKE: `lose_node` stops a node's heartbeat and status
writes while its processes run on (the node lifecycle controller then marks it NotReady and
taints it); `kill_node` ends its processes (the VM is gone); `evict` is the kubelet's own
node-pressure eviction. `hollow=True` runs no processes (pods get status only, as kwok does),
for thousands of pods in the real API server.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.local.kube_api import STRATEGIC, ApiError, KubeApi, pod_path
from adapters.local.kubelet import pod_status
from adapters.local.kubelet.container import (
    Container,
    VolumeError,
    config_map_files,
    remap,
    secret_files,
    write_volume,
)
from adapters.local.kubelet.log_server import LogServer
from adapters.local.kubelet.node import (
    RENEW_EVERY_S,
    NodeSpec,
    lease_object,
    node_object,
    node_status,
)
from adapters.local.kubelet.proc_usage import clock_ticks_per_s, tree_usage
from adapters.local.kubelet.resource_metrics import ContainerSample

log = logging.getLogger("cave_pipeline.kubelet")


@dataclass
class Hollow:
    """A hollow node's pods: Running at once, Succeeded after `run_s` (no process)."""

    run_s: float = 1.0


@dataclass
class _HollowContainer:
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int | None = None
    oom_killed: bool = False
    run_s: float = 1.0
    killed: bool = False
    proc: None = None

    def poll(self) -> int | None:
        if self.exit_code is None and self.started is not None:
            if self.killed or (datetime.now(UTC) - self.started).total_seconds() >= self.run_s:
                self.exit_code = 137 if self.killed else 0
                self.finished = datetime.now(UTC)
        return self.exit_code

    def terminate(self, grace_seconds: float) -> None:
        self.killed = True

    def kill_now(self) -> None:
        self.killed = True


@dataclass
class _Pod:
    """What the kubelet knows of one pod bound to one of its nodes."""

    obj: dict[str, Any]
    container: Any = None  # Container, _HollowContainer, or None before start
    running_written: bool = False
    terminal_written: bool = False
    deleted: bool = False  # the final DELETE was sent
    terminating: bool = False
    evicted: str = ""  # the eviction message, once evicted
    next_try: float = 0.0  # volumes not ready: retry after this
    # The container's `resources` last reported as actuated (an in-place resize changes the
    # spec's: the kubelet then actuates and reports the new ones).
    reported_resources: dict[str, Any] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        return self.obj["metadata"]

    @property
    def node(self) -> str:
        return self.obj["spec"].get("nodeName", "")

    @property
    def api_terminal(self) -> bool:
        return (self.obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")


@dataclass
class ProcessKubelet:
    """Start with `with ProcessKubelet(api, nodes, state_dir) as kubelet:`."""

    api: KubeApi
    nodes: list[NodeSpec]
    state_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    hollow: Hollow | None = None
    poll_interval: float = 0.05
    kubelet_version: str = "v1.34.4"
    _pods: dict[str, _Pod] = field(default_factory=dict)
    _lost: set[str] = field(default_factory=set)
    # (node, container) of lost nodes whose pods are gone from the API: zombies that run on
    # (as on a VM cut off from the control plane) until their claim is fenced, or their VM
    # goes (kill_node), or the kubelet stops.
    _orphans: list[tuple[str, Any]] = field(default_factory=list)
    _servers: dict[str, LogServer] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _usage: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def __enter__(self) -> ProcessKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ProcessKubelet:
        # Absolute: a pod's env points into its folder, and the pod runs in another directory.
        self.state_dir = self.state_dir.absolute()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.nodes:
            server = self._serve(spec.name)
            self._servers[spec.name] = server
            self._register(spec, server.port)
        for target, name in (
            (self._watch_loop, "kubelet-watch"),
            (self._sync_loop, "kubelet-sync"),
            (self._heartbeat_loop, "kubelet-leases"),
        ):
            thread = threading.Thread(target=target, daemon=True, name=name)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop the node side: every pod process ends (the VMs go away)."""
        self._stop.set()
        self.api.close()  # ends the open watch
        for thread in self._threads:
            thread.join(timeout=5.0)
        with self._lock:
            containers = [p.container for p in self._pods.values()]
            containers += [c for _, c in self._orphans]
            for container in containers:
                if container is not None and container.exit_code is None:
                    container.kill_now()
        for server in self._servers.values():
            server.stop()

    # -- faults ----------------------------------------------------------------------------

    def lose_node(self, name: str) -> list[str]:
        """The node loses the API server: no more Lease renewals or status writes; its
        processes run on (zombies, still reaching Bigtable). Returns its pods' names."""
        with self._lock:
            self._lost.add(name)
            return [p.meta["name"] for p in self._pods.values() if p.node == name]

    def kill_node(self, name: str) -> None:
        """The node's VM is gone: its processes end, zombies whose pods are gone included."""
        with self._lock:
            for pod in self._pods.values():
                if pod.node == name and pod.container is not None:
                    pod.container.kill_now()
            for node, container in self._orphans:
                if node == name and container.exit_code is None:
                    container.kill_now()

    def evict(self, namespace: str, name: str, message: str) -> bool:
        """The kubelet's node-pressure eviction of a running pod: its container is killed, the
        pod Failed with DisruptionTarget (TerminationByKubelet) and reason Evicted."""
        with self._lock:
            pod = next(
                (
                    p
                    for p in self._pods.values()
                    if p.meta["name"] == name and p.meta["namespace"] == namespace
                ),
                None,
            )
            if pod is None or pod.container is None or pod.terminal_written:
                return False
            pod.evicted = message
            pod.container.kill_now()
            return True

    def kill_container(self, name: str) -> bool:
        """SIGKILL a running pod's container (exit 137: an ordinary, counted failure)."""
        with self._lock:
            pod = self._find(name)
            if pod is None or not isinstance(pod.container, Container) or pod.terminal_written:
                return False
            pod.container.signal(9)
            return True

    def running_pods(self) -> list[tuple[str, str]]:
        """(pod, node) of every pod whose container runs, on nodes not lost, and that is not
        already being deleted (a pod in its grace period is no pod left to preempt)."""
        with self._lock:
            return [
                (p.meta["name"], p.node)
                for p in self._pods.values()
                if p.container is not None
                and p.container.exit_code is None
                and not p.terminal_written
                and not p.terminating
                and p.node not in self._lost
            ]

    def node_of(self, name: str) -> str | None:
        with self._lock:
            pod = self._find(name)
            return None if pod is None else pod.node

    def _serve(self, node: str) -> LogServer:
        """The node's kubelet endpoint (logs, resource metrics), started."""
        return LogServer(
            self._log_lookup(node),
            self.state_dir / "tls",
            metrics=lambda: self.resource_samples(node),
        ).start()

    def add_node(self, spec: NodeSpec) -> None:
        """Register one more node (a replacement VM)."""
        server = self._serve(spec.name)
        with self._lock:
            self._servers[spec.name] = server
            self.nodes.append(spec)
        self._register(spec, server.port)

    def _find(self, name: str) -> _Pod | None:
        return next((p for p in self._pods.values() if p.meta["name"] == name), None)

    def pod_names(self, node: str) -> list[str]:
        with self._lock:
            return [p.meta["name"] for p in self._pods.values() if p.node == node]

    def life_usage(self, pod_name: str) -> tuple[float | None, float | None]:
        """(peak memory GiB, mean vCPU) the kubelet measured of a pod (kept after it goes)."""
        with self._lock:
            return self._usage.get(pod_name, (None, None))

    def running_pids(self) -> dict[str, int]:
        """Pod name -> pid of every container process still running."""
        with self._lock:
            return {
                p.meta["name"]: p.container.proc.pid
                for p in self._pods.values()
                if isinstance(p.container, Container)
                and p.container.proc is not None
                and p.container.exit_code is None
            }

    # -- nodes -----------------------------------------------------------------------------

    def _register(self, spec: NodeSpec, port: int) -> None:
        body = node_object(spec, port)
        self.api.request("POST", "/api/v1/nodes", body, ok=(409,))
        self._post_status(spec, port)
        self._renew(spec.name)

    def _post_status(self, spec: NodeSpec, port: int) -> None:
        status = node_status(spec, port, datetime.now(UTC))
        status["status"]["nodeInfo"]["kubeletVersion"] = self.kubelet_version
        self.api.request(
            "PATCH", f"/api/v1/nodes/{spec.name}/status", status, content_type=STRATEGIC
        )

    def _renew(self, name: str) -> None:
        lease = lease_object(name, datetime.now(UTC))
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        created = self.api.request(
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            lease,
            ok=(409,),
        )
        if created is None:
            self.api.request(
                "PATCH", path, {"spec": lease["spec"]}, content_type="application/merge-patch+json"
            )

    def _sync_node_status(self, spec: NodeSpec) -> None:
        """What the kubelet's status loop (every nodeStatusUpdateFrequency, 10 s) does when its
        Node no longer says what the kubelet would write: after an API outage longer than the
        node monitor's grace period the node lifecycle controller has set Ready to Unknown (and
        tainted the node), and only the kubelet posting Ready again clears it; a Node deleted
        meanwhile is registered anew."""
        port = self._servers[spec.name].port
        node = self.api.request("GET", f"/api/v1/nodes/{spec.name}", ok=(404,))
        if node is None:
            self._register(spec, port)
            log.info("node %s: registered again (its Node was deleted)", spec.name)
            return
        conditions = (node.get("status") or {}).get("conditions") or []
        if _ready_of(conditions) == "True":
            return
        self._post_status(spec, port)
        log.info("node %s: posted Ready again (was %s)", spec.name, _ready_of(conditions))

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(RENEW_EVERY_S):
            for spec in self.nodes:
                if spec.name in self._lost:
                    continue
                try:
                    self._renew(spec.name)
                    self._sync_node_status(spec)
                except (ApiError, OSError, Exception) as e:  # noqa: BLE001 - an outage: retry
                    log.debug("lease or status of %s not written: %s", spec.name, e)

    # -- pods: watch -----------------------------------------------------------------------

    def _ours(self, obj: dict[str, Any]) -> bool:
        node = (obj.get("spec") or {}).get("nodeName", "")
        return any(n.name == node for n in self.nodes)

    def _watch_loop(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    listed = self.api.request(
                        "GET", "/api/v1/pods", query={"fieldSelector": "spec.nodeName!="}
                    )
                    rv = listed["metadata"]["resourceVersion"]
                    self._replace_all([o for o in listed["items"] if self._ours(o)])
                for event in self.api.watch(
                    "/api/v1/pods", {"fieldSelector": "spec.nodeName!=", "resourceVersion": rv}, 60
                ):
                    if self._stop.is_set():
                        return
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        rv = ""  # 410 Gone: list again
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if kind == "BOOKMARK" or not self._ours(obj):
                        continue
                    self._observe(kind, obj)
            except Exception as e:  # noqa: BLE001 - the API server is down: retry
                log.debug("pod watch interrupted: %s", e)
                if self._stop.wait(0.5):
                    return

    def _replace_all(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            seen = set()
            for obj in items:
                uid = obj["metadata"]["uid"]
                seen.add(uid)
                if uid in self._pods:
                    self._pods[uid].obj = obj
                else:
                    self._pods[uid] = _Pod(obj)
            for uid in [u for u in self._pods if u not in seen]:
                self._gone(self._pods.pop(uid))

    def _observe(self, kind: str, obj: dict[str, Any]) -> None:
        uid = obj["metadata"]["uid"]
        with self._lock:
            if kind == "DELETED":
                pod = self._pods.pop(uid, None)
                if pod is not None:
                    self._gone(pod)
                return
            if uid in self._pods:
                self._pods[uid].obj = obj
            else:
                self._pods[uid] = _Pod(obj)

    def _gone(self, pod: _Pod) -> None:
        """The pod object is gone from the API (deleted, or force-deleted by pod GC): its
        container is killed and its files removed, its log with them; on a lost node the
        container runs on (a zombie) and is kept for `stop`."""
        running = pod.container is not None and pod.container.exit_code is None
        if pod.node in self._lost:
            if running:  # its node's processes run on, unseen by the API: still ours to stop
                self._orphans.append((pod.node, pod.container))
            return
        if running:
            pod.container.kill_now()
        shutil.rmtree(self._folder(pod), ignore_errors=True)

    # -- pods: sync ------------------------------------------------------------------------

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.poll_interval):
            with self._lock:
                pods = [p for p in self._pods.values() if p.node not in self._lost]
            for pod in pods:
                if pod.node in self._lost:
                    # Lost since the round began: its VM writes nothing more (a kill_node's
                    # exit would otherwise be reported as the pod's failure).
                    continue
                try:
                    self._sync(pod)
                except Exception as e:  # noqa: BLE001 - an outage or a race: next round
                    log.debug("pod %s: sync failed: %s", pod.meta.get("name"), e)

    def _sync(self, pod: _Pod) -> None:
        if pod.deleted:
            return
        meta = pod.meta
        deleting = meta.get("deletionTimestamp") is not None
        if pod.container is None:
            if pod.api_terminal:
                pod.terminal_written = True
            elif deleting:
                self._write_never_started(pod)
            elif time.monotonic() >= pod.next_try:
                self._start(pod)
        if pod.container is not None and not pod.terminal_written:
            if deleting and not pod.terminating:
                grace = meta.get("deletionGracePeriodSeconds")
                pod.terminating = True
                pod.container.terminate(float(30 if grace is None else grace))
            code = pod.container.poll()
            resources = self._resources(pod)
            resized = pod.running_written and resources != pod.reported_resources
            if (not pod.running_written or resized) and pod.container.started is not None:
                if code is None:
                    if resized and hasattr(pod.container, "pod"):
                        pod.container.pod = pod.obj  # actuate: its memory limit is the new one
                    self._patch_status(
                        pod,
                        pod_status.running(
                            self._container_name(pod),
                            self._image(pod),
                            getattr(pod.container.proc, "pid", None),
                            pod.container.started,
                            resources,
                            pod.meta.get("generation"),
                        ),
                    )
                    pod.running_written, pod.reported_resources = True, resources
            if code is not None:
                self._finish(pod, code)
        if pod.terminal_written and deleting and not pod.deleted:
            ns, name = meta["namespace"], meta["name"]
            self.api.request(
                "DELETE",
                pod_path(ns, name),
                pod_status.pod_uid_precondition(meta["uid"]),
                ok=(404, 409),
            )
            pod.deleted = True

    def _resources(self, pod: _Pod) -> dict[str, Any]:
        return ((pod.obj["spec"].get("containers") or [{}])[0]).get("resources") or {}

    def _container_name(self, pod: _Pod) -> str:
        return ((pod.obj["spec"].get("containers") or [{}])[0]).get("name", "main")

    def _image(self, pod: _Pod) -> str:
        return ((pod.obj["spec"].get("containers") or [{}])[0]).get("image", "")

    def _patch_status(self, pod: _Pod, patch: dict[str, Any]) -> None:
        meta = pod.meta
        patch.setdefault("metadata", {})["uid"] = meta["uid"]  # a precondition on the UID
        updated = self.api.request(
            "PATCH",
            pod_path(meta["namespace"], meta["name"], "status"),
            patch,
            content_type=STRATEGIC,
            ok=(404,),
        )
        if updated is not None:
            with self._lock:
                pod.obj = updated

    def _folder(self, pod: _Pod) -> Path:
        meta = pod.meta
        return self.state_dir / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"

    def _start(self, pod: _Pod) -> None:
        now = datetime.now(UTC)
        if self.hollow is not None:
            pod.container = _HollowContainer(started=now, run_s=self.hollow.run_s)
            return
        container = Container(pod.obj, self._folder(pod), self.extra_env)
        try:
            mounts = self._volumes(pod, container)
            env = container.env(lambda kind, name, key: self._lookup(pod, kind, name, key))
        except VolumeError as e:
            log.info("pod %s: %s (retrying)", pod.meta["name"], e)
            pod.next_try = time.monotonic() + 2.0
            return
        env = remap(env, mounts)
        pod.container = container
        if not container.start(env, now):
            self._patch_status(
                pod,
                pod_status.start_failed(
                    container.name,
                    container.image,
                    "the container's command cannot be started",
                    now,
                ),
            )
            pod.terminal_written = True

    def _finish(self, pod: _Pod, code: int) -> None:
        c = pod.container
        finished = c.finished or datetime.now(UTC)
        if isinstance(c, Container):
            self._usage[pod.meta["name"]] = (
                c.usage.peak_memory_gib(),
                c.usage.cpu_used(c.runtime_s()),
            )
        patch = pod_status.terminated(
            self._container_name(pod),
            self._image(pod),
            getattr(c.proc, "pid", None),
            code,
            started=c.started,
            finished=finished,
            oom_killed=c.oom_killed,
        )
        if pod.evicted:
            evicted = pod_status.evicted(pod.evicted, finished)
            patch["status"].update(
                {k: v for k, v in evicted["status"].items() if k != "conditions"}
            )
            patch["status"]["conditions"] += evicted["status"]["conditions"]
        elif pod.terminating and code == 0 and pod.meta.get("deletionTimestamp"):
            pass  # a container that ended well during its grace period succeeded
        self._patch_status(pod, patch)
        pod.terminal_written = True

    def _write_never_started(self, pod: _Pod) -> None:
        now = datetime.now(UTC)
        patch = pod_status.terminated(
            self._container_name(pod), self._image(pod), None, 137, started=now, finished=now
        )
        patch["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = (
            "ContainerStatusUnknown"
        )
        self._patch_status(pod, patch)
        pod.terminal_written = True

    # -- volumes ---------------------------------------------------------------------------

    def _get(self, pod: _Pod, kind: str, name: str) -> dict[str, Any] | None:
        ns = pod.meta["namespace"]
        path = {"configMap": "configmaps", "secret": "secrets"}[kind]
        return self.api.request("GET", f"/api/v1/namespaces/{ns}/{path}/{name}", ok=(404,))

    def _lookup(self, pod: _Pod, kind: str, name: str, key: str) -> Any:
        if kind.endswith("All"):
            obj = self._get(pod, "configMap" if kind.startswith("configMap") else "secret", name)
            if obj is None:
                return {}
            files = config_map_files(obj) if kind.startswith("configMap") else secret_files(obj)
            return {k: v.decode() for k, v in files.items()}
        obj = self._get(pod, kind, name)
        if obj is None:
            raise VolumeError(f"{kind} {name} not found (env {key})")
        files = config_map_files(obj) if kind == "configMap" else secret_files(obj)
        value = files.get(key)
        return None if value is None else value.decode()

    def _volumes(self, pod: _Pod, container: Container) -> dict[str, Path]:
        """Write the pod's volumes; mountPath -> local path of each of the container's mounts."""
        root = container.folder / "volumes"
        made: dict[str, Path] = {}
        for volume in pod.obj["spec"].get("volumes") or []:
            name = volume["name"]
            made[name] = self._volume(pod, volume, root / name)
        mounts: dict[str, Path] = {}
        for mount in container.spec.get("volumeMounts") or []:
            local = made.get(mount["name"])
            if local is None:
                continue
            sub = str(mount.get("subPath") or "").strip("/")
            mounts[str(mount["mountPath"]).rstrip("/")] = local / sub if sub else local
        return mounts

    def _volume(self, pod: _Pod, volume: dict[str, Any], folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        for kind in ("configMap", "secret"):
            if kind in volume:
                source = volume[kind]
                name = source.get("name") or source.get("secretName", "")
                obj = self._get(pod, kind, name)
                if obj is None:
                    if source.get("optional"):
                        return folder
                    raise VolumeError(f"{kind} {name!r} of volume {volume['name']} not found")
                files = config_map_files(obj) if kind == "configMap" else secret_files(obj)
                return write_volume(folder, _items(files, source.get("items")))
        if "projected" in volume:
            for source in volume["projected"].get("sources") or []:
                write_volume(folder, self._projected(pod, source))
        return folder  # emptyDir and the rest: an empty folder

    def _projected(self, pod: _Pod, source: dict[str, Any]) -> dict[str, bytes]:
        meta = pod.meta
        if "serviceAccountToken" in source:
            s = source["serviceAccountToken"]
            sa = pod.obj["spec"].get("serviceAccountName") or "default"
            answer = self.api.request(
                "POST",
                f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{sa}/token",
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {
                        "audiences": [s["audience"]] if s.get("audience") else [],
                        "expirationSeconds": int(s.get("expirationSeconds", 3607)),
                        "boundObjectRef": {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": meta["name"],
                            "uid": meta["uid"],
                        },
                    },
                },
            )
            return {s["path"]: answer["status"]["token"].encode()}
        if "configMap" in source:
            obj = self._get(pod, "configMap", source["configMap"]["name"])
            if obj is None:
                if source["configMap"].get("optional"):
                    return {}
                raise VolumeError(f"configMap {source['configMap']['name']!r} not found")
            return _items(config_map_files(obj), source["configMap"].get("items"))
        if "secret" in source:
            obj = self._get(pod, "secret", source["secret"]["name"])
            if obj is None:
                return {}
            return _items(secret_files(obj), source["secret"].get("items"))
        if "downwardAPI" in source:
            from adapters.local.kubelet.container import field_value

            return {
                item["path"]: (field_value(pod.obj, item["fieldRef"]["fieldPath"]) or "").encode()
                for item in source["downwardAPI"].get("items") or []
                if "fieldRef" in item
            }
        return {}

    # -- logs ------------------------------------------------------------------------------

    def resource_samples(self, node: str) -> list[ContainerSample]:
        """The node's running containers measured now, for `/metrics/resource`."""
        with self._lock:
            running = [
                (p.meta["namespace"], p.meta["name"], p.container)
                for p in self._pods.values()
                if p.node == node
                and isinstance(p.container, Container)
                and p.container.proc is not None
                and p.container.exit_code is None
                and p.container.started is not None
            ]
        hz, out = clock_ticks_per_s(), []
        for namespace, name, c in running:
            usage = tree_usage(c.proc.pid)
            if usage is not None:
                out.append(
                    ContainerSample(
                        namespace, name, c.name, usage[0] / hz, usage[1], c.started.timestamp()
                    )
                )
        return out

    def _log_lookup(self, node: str) -> Any:
        def lookup(namespace: str, name: str) -> tuple[Path, Any] | None:
            with self._lock:
                for pod in self._pods.values():
                    if (
                        pod.node == node
                        and pod.meta["name"] == name
                        and pod.meta["namespace"] == namespace
                    ):
                        c = pod.container
                        if not isinstance(c, Container):
                            return None
                        return c.log_path, lambda c=c: c.exit_code is None
            return None

        return lookup


def _ready_of(conditions: list[dict[str, Any]]) -> str:
    """The Ready condition's status, or "absent"."""
    return next((c.get("status", "") for c in conditions if c.get("type") == "Ready"), "absent")


def _items(files: dict[str, bytes], items: list[dict[str, Any]] | None) -> dict[str, bytes]:
    """A volume's `items` (key -> path) applied to its files; all files without them."""
    if not items:
        return files
    return {item["path"]: files[item["key"]] for item in items if item["key"] in files}
