"""Kubernetes' own control plane on this machine: etcd, kube-apiserver, kube-controller-manager
and kube-scheduler (and metrics-server, `metrics_server.py`) from the multi-call binary
`build.py` makes, on free 127.0.0.1 ports, with their data in one folder, each in its own
process group, stopped by its PID and dying with the thread that started it.

- The API server runs RBAC with service-account tokens (one RSA key signs and verifies them),
  serves with the certificate it makes itself in `<dir>/certs` (the kubeconfigs trust it), and
  knows three static identities (`tokens.csv`): the admin (`system:masters`, for the stack's
  own setup and the process kubelet), the controller manager and the scheduler (their
  bootstrap RBAC users). Everyone else acts as a ServiceAccount.
- The controller manager runs what Job semantics need: the Job controller, pod GC, the garbage
  collector, node lifecycle, taint eviction, TTL-after-finished, namespaces and service
  accounts (`CONTROLLERS`), each controller with its own service account.
- Timings are Kubernetes' defaults. A test may shorten the Job controller's pod-failure back-off
  only through `CAVE_TEST_JOB_POD_FAILURE_BACKOFF_SECONDS` (main.go), and the node-monitor
  grace period through `node_monitor_grace`.

docs/local-cluster.md has the start time and memory.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.common.termination import unwind_on_termination
from adapters.local.controlplane.metrics_server import (
    FrontProxy,
    apiserver_flags,
    process_args,
    write_front_proxy,
)
from adapters.local.process_groups import (
    HOST,
    free_port,
    kill_group,
    log_tail,
    start_group_dying_with_parent,
)

log = logging.getLogger("cave_pipeline.control_plane")

CONTROLLERS = (
    "job-controller",
    "pod-garbage-collector-controller",
    "garbage-collector-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "ttl-after-finished-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "disruption-controller",
)
SERVICE_CIDR = "10.96.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"
READY_TIMEOUT = 60.0
GKE_TERMINATED_POD_GC_THRESHOLD = 1000


class ControlPlaneError(RuntimeError):
    """A control-plane process could not start or become ready; the message has its log."""


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path


@dataclass
class ControlPlane:
    """Start with `with ControlPlane(dir, binary) as cp:`; `cp.kubeconfig(user)` for clients."""

    state_dir: Path
    binary: Path
    node_monitor_grace: float | None = None  # seconds; None: Kubernetes' default (50 s)
    # The controller manager's and the scheduler's client rate (--kube-api-qps, burst twice
    # that); None: Kubernetes' defaults (20 and 50 requests/s). Only the scale bench raises it,
    # so that 5,000 pods are created and bound in a minute (docs/local-cluster.md).
    api_qps: int | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    server: str = ""
    etcd_url: str = ""
    _procs: list[_Proc] = field(default_factory=list)
    _tokens: dict[str, str] = field(default_factory=dict)
    front_proxy: FrontProxy | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        unwind_on_termination()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if not self.binary.is_file():
            raise ControlPlaneError(
                f"the control-plane binary {self.binary} is missing: run scripts/setup.sh "
                "(it builds Kubernetes from Go modules, once)"
            )
        self._write_credentials()
        self._start_etcd()
        self._start_apiserver()
        self._write_kubeconfigs()
        self._start("kube-controller-manager", self._controller_manager_args(), env=self.extra_env)
        self._start("kube-scheduler", self._scheduler_args())
        return self

    def stop(self) -> None:
        """Stop every process this started, newest first, by its process group."""
        while self._procs:
            proc = self._procs.pop()
            # The API server drains its open watches for a minute on SIGTERM: a throw-away
            # cluster gets a few seconds.
            kill_group(proc.popen, timeout=3.0)

    def pids(self) -> dict[str, int]:
        return {p.name: p.popen.pid for p in self._procs}

    def process(self, name: str) -> subprocess.Popen[bytes]:
        for p in self._procs:
            if p.name == name:
                return p.popen
        raise KeyError(name)

    # -- identities ------------------------------------------------------------------------

    @property
    def ca_file(self) -> Path:
        """The API server's own serving certificate (self-signed, with its CA): what clients
        verify it against."""
        return self.state_dir / "certs" / "apiserver.crt"

    def token(self, user: str) -> str:
        return self._tokens[user]

    def kubeconfig(self, name: str = "admin") -> Path:
        """A kubeconfig file for one identity (admin, or a ServiceAccount added later)."""
        return self.state_dir / f"{name}.kubeconfig"

    def write_kubeconfig(self, name: str, token: str, namespace: str = "default") -> Path:
        """Write `<dir>/<name>.kubeconfig` for a bearer token; returns its path."""
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [
                {
                    "name": name,
                    "context": {"cluster": "local", "user": name, "namespace": namespace},
                }
            ],
            "current-context": name,
        }
        path = self.kubeconfig(name)
        path.write_text(json.dumps(config, indent=1))
        path.chmod(0o600)
        return path

    def _write_credentials(self) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key_path = self.state_dir / "sa.key"
        if not key_path.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            key_path.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.TraditionalOpenSSL,
                    serialization.NoEncryption(),
                )
            )
            key_path.chmod(0o600)
        users = {
            "admin": ("admin", "system:masters"),
            "kube-controller-manager": ("system:kube-controller-manager", ""),
            "kube-scheduler": ("system:kube-scheduler", ""),
        }
        lines = []
        for name, (user, group) in users.items():
            token = self._tokens.setdefault(name, secrets.token_hex(16))
            lines.append(f"{token},{user},{user}" + (f',"{group}"' if group else ""))
        tokens = self.state_dir / "tokens.csv"
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        self.front_proxy = write_front_proxy(self.state_dir / "front-proxy")

    def _write_kubeconfigs(self) -> None:
        for name in ("admin", "kube-controller-manager", "kube-scheduler"):
            self.write_kubeconfig(name, self._tokens[name])

    # -- processes -------------------------------------------------------------------------

    def _start(
        self, name: str, args: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log_path = self.state_dir / f"{name}.log"
        with log_path.open("ab") as out:
            popen = start_group_dying_with_parent(
                [str(self.binary), name, *args], out, {**os.environ, **(env or {})}
            )
        self._procs.append(_Proc(name, popen, log_path))
        log.debug("started %s (pid %d)", name, popen.pid)
        return popen

    def _exited(self, name: str) -> ControlPlaneError | None:
        for p in self._procs:
            if p.name == name and p.popen.poll() is not None:
                return ControlPlaneError(
                    f"{name} exited with {p.popen.returncode}; its log ({p.log_path}):\n"
                    f"{log_tail(p.log_path)}"
                )
        return None

    def _wait(self, name: str, ready: Any) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not ready():
            error = self._exited(name)
            if error is not None:
                raise error
            if time.monotonic() > deadline:
                path = self.state_dir / f"{name}.log"
                raise ControlPlaneError(
                    f"{name} not ready after {READY_TIMEOUT:.0f} s; its log ({path}):\n"
                    f"{log_tail(path)}"
                )
            time.sleep(0.1)

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://{HOST}:{client}"
        peer_url = f"http://{HOST}:{peer}"
        self._start(
            "etcd",
            [
                "--name=local",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=local={peer_url}",
                "--log-level=warn",
                # A throw-away store: no fsync per write (etcd's own flag for tests).
                "--unsafe-no-fsync",
            ],
        )
        self._wait("etcd", lambda: _http_ok(f"{self.etcd_url}/health"))

    def restart_apiserver(self, down_s: float, cancel: threading.Event | None = None) -> bool:
        """An API outage: stop the API server (SIGTERM, then SIGKILL), keep it down for
        `down_s`, start it again on the same port and wait until it is ready. Every client
        (controller, kubelet, controller manager, scheduler) sees refused connections
        meanwhile, as on a control-plane upgrade or a regional outage. `cancel` set (the
        cluster stopping) ends the outage without a restart; True if it restarted."""
        proc = next(p for p in self._procs if p.name == "kube-apiserver")
        self._procs.remove(proc)
        kill_group(proc.popen, timeout=3.0)
        log.info("kube-apiserver stopped (pid %d) for %.0f s", proc.popen.pid, down_s)
        if (cancel or threading.Event()).wait(down_s):
            return False
        self._start_apiserver(port=int(self.server.rsplit(":", 1)[1]))
        log.info("kube-apiserver ready again (pid %d)", self.process("kube-apiserver").pid)
        return True

    def _start_apiserver(self, port: int | None = None) -> None:
        port = port or free_port()
        self.server = f"https://{HOST}:{port}"
        key = self.state_dir / "sa.key"
        assert self.front_proxy is not None  # written with the credentials
        self._start(
            "kube-apiserver",
            [
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={port}",
                f"--cert-dir={self.state_dir / 'certs'}",
                "--authorization-mode=RBAC",
                f"--token-auth-file={self.state_dir / 'tokens.csv'}",
                f"--service-account-issuer={ISSUER}",
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--kubelet-preferred-address-types=InternalIP",
                *apiserver_flags(self.front_proxy),
                "--profiling=false",
                "--v=0",
            ],
        )
        token = self._tokens["admin"]
        self._wait("kube-apiserver", lambda: self._api_ok("/readyz", token))

    def start_metrics_server(self, kubeconfig: Path, port: int) -> None:
        """Start metrics-server on ``port`` as the identity of ``kubeconfig``; stopped with
        the rest. Its objects (RBAC, APIService) are the caller's to apply first."""
        self._start(
            "metrics-server",
            process_args(HOST, port, self.state_dir / "metrics-server", kubeconfig),
        )

    def _controller_manager_args(self) -> list[str]:
        args = [
            f"--kubeconfig={self.kubeconfig('kube-controller-manager')}",
            "--leader-elect=false",
            f"--controllers={','.join(CONTROLLERS)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self.state_dir / 'sa.key'}",
            f"--root-ca-file={self.ca_file}",
            # GKE keeps 1,000 terminated pods before pod GC deletes the oldest
            f"--terminated-pod-gc-threshold={GKE_TERMINATED_POD_GC_THRESHOLD}",
            f"--bind-address={HOST}",
            "--secure-port=0",
            "--v=0",
        ]
        if self.node_monitor_grace is not None:
            args.append(f"--node-monitor-grace-period={self.node_monitor_grace:g}s")
        return args + self._qps_args()

    def _qps_args(self) -> list[str]:
        if self.api_qps is None:
            return []
        return [f"--kube-api-qps={self.api_qps}", f"--kube-api-burst={2 * self.api_qps}"]

    def _scheduler_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig('kube-scheduler')}",
            f"--authentication-kubeconfig={self.kubeconfig('kube-scheduler')}",
            f"--authorization-kubeconfig={self.kubeconfig('kube-scheduler')}",
            "--leader-elect=false",
            f"--bind-address={HOST}",
            "--secure-port=0",
            "--v=0",
            *self._qps_args(),
        ]

    def _api_ok(self, path: str, token: str) -> bool:
        if not self.ca_file.exists():
            return False
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file))
        except ssl.SSLError:  # the API server is still writing its certificate: not ready
            return False
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {token}"}
        )
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        try:
            with opener.open(request, timeout=2.0) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_ok(url: str) -> bool:
    try:
        with _NO_PROXY.open(url, timeout=2.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
