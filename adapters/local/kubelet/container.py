"""One pod's container as a local process: its env (the downward API resolved), its volumes
(ConfigMaps, Secrets and projected service-account tokens written as files), its command, its
log in the CRI format the kubelet keeps, and what it uses from /proc.

A pod's process has no filesystem of its own, so a volume cannot appear at its `mountPath`;
each volume is written under the pod's folder and every env value under a mount path is
remapped there (`remap`), the way the images read their files (the dataset file, credential
files) through env. Exit codes follow the container runtime: a process killed by signal N
exits 128+N (SIGTERM 143, SIGKILL 137).
"""

from __future__ import annotations

import base64
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.local.kubelet.proc_usage import LifeUsage

log = logging.getLogger("cave_pipeline.kubelet")

_VAR_REF = re.compile(r"\$(\$|\(([A-Za-z_][A-Za-z0-9_.-]*)\))")
_ANNOTATION_REF = re.compile(r"^metadata\.(annotations|labels)\['(.+)'\]$")
START_ERROR_EXIT_CODE = 128
# Fault injection: a pod whose env sets this peak (GiB) above its memory limit (or request) is
# killed as by the OOM killer (SIGKILL, exit 137, OOMKilled), as a container over its memory
# limit would be.
PEAK_MEMORY_ENV = "LOCAL_POD_PEAK_MEMORY_GIB"
GIB = 1024**3
PROJECT_ROOT = Path(__file__).resolve().parents[3]


class VolumeError(RuntimeError):
    """A volume the pod needs cannot be made (a missing ConfigMap or Secret)."""


def exit_code_of(returncode: int) -> int:
    """A Popen return code as a container exit code (signal N -> 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command, args and env values ($$ escapes)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) == "$":
            return "$"
        return env.get(m.group(2), m.group(0))

    return _VAR_REF.sub(sub, text)


def field_value(pod: dict[str, Any], path: str) -> str | None:
    """A downward-API fieldRef of the pod (None: not a field the kubelet resolves)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": "127.0.0.1",
        "status.podIP": "127.0.0.1",
    }
    if path in simple:
        return simple[path]
    m = _ANNOTATION_REF.match(path)
    if m:
        return (meta.get(m.group(1)) or {}).get(m.group(2), "")
    return None


def quantity(text: str) -> float:
    """A Kubernetes quantity as a number (cpu in cores, memory in bytes)."""
    units = {
        "m": 1e-3,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
    }
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text).strip())
    if m is None:
        raise ValueError(f"not a quantity: {text!r}")
    return float(m.group(1)) * units.get(m.group(2), 1.0)


@dataclass
class Container:
    """The one container of a pod (the pipeline's pods have one), run as a process group."""

    pod: dict[str, Any]
    folder: Path  # <state>/pods/<uid>/
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int | None = None
    oom_killed: bool = False
    kill_at: float | None = None
    usage: LifeUsage = field(default_factory=LifeUsage)
    _pump: threading.Thread | None = None

    @property
    def spec(self) -> dict[str, Any]:
        return (self.pod["spec"].get("containers") or [{}])[0]

    @property
    def name(self) -> str:
        return self.spec.get("name", "main")

    @property
    def image(self) -> str:
        return self.spec.get("image", "")

    @property
    def log_path(self) -> Path:
        return self.folder / "container.log"

    def memory_limit_bytes(self) -> float | None:
        res = self.spec.get("resources") or {}
        text = (res.get("limits") or {}).get("memory")
        return quantity(text) if text else None

    def memory_request_bytes(self) -> float:
        res = self.spec.get("resources") or {}
        text = (res.get("requests") or {}).get("memory")
        return quantity(text) if text else 0.0

    def env(self, lookup: Callable[[str, str, str], str | None]) -> dict[str, str]:
        """The container's env: values, fieldRefs, ConfigMap and Secret keys (`lookup(kind,
        name, key)`), `$(VAR)` expanded; the kubelet's own env (PATH, the stack's) beneath."""
        env: dict[str, str] = {}
        for source in self.spec.get("envFrom") or []:
            for kind in ("configMapRef", "secretRef"):
                if kind in source:
                    env.update(lookup(kind + "All", source[kind]["name"], "") or {})  # type: ignore[arg-type]
        for var in self.spec.get("env") or []:
            name = var["name"]
            if "valueFrom" not in var:
                env[name] = expand(str(var.get("value", "")), env)
                continue
            ref = var["valueFrom"]
            value: str | None = None
            if "fieldRef" in ref:
                value = field_value(self.pod, ref["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in ref:
                r = ref["configMapKeyRef"]
                value = lookup("configMap", r["name"], r["key"])
            elif "secretKeyRef" in ref:
                r = ref["secretKeyRef"]
                value = lookup("secret", r["name"], r["key"])
            elif "resourceFieldRef" in ref:
                r = ref["resourceFieldRef"]
                kind, _, res = r["resource"].partition(".")
                text = ((self.spec.get("resources") or {}).get(kind) or {}).get(res, "0")
                divisor = quantity(r.get("divisor", "1"))
                value = str(max(1, int(-(-quantity(text) // divisor))))
            if value is None:
                log.warning("pod %s: env %s not resolved", self.pod["metadata"]["name"], name)
                continue
            env[name] = value
        return env

    def argv(self, env: dict[str, str]) -> list[str]:
        argv = [
            expand(a, env)
            for a in [*(self.spec.get("command") or []), *(self.spec.get("args") or [])]
        ]
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the image's python is this machine's
        return argv

    def start(self, env: dict[str, str], now: datetime) -> bool:
        """Start the process (its stdout and stderr pumped into the CRI log); False if the
        command cannot be started (the log says why)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        argv = self.argv(env)
        # The "image" is this checkout: its packages importable from any working directory;
        # HOSTNAME is the pod's name, as a container runtime sets it.
        full_env = {**os.environ, **self.extra_env, **env, "HOSTNAME": self.pod["metadata"]["name"]}
        path = [str(PROJECT_ROOT), full_env.get("PYTHONPATH", "")]
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
        try:
            # The working directory is the pod's folder: with `python -m`, the working
            # directory comes first on sys.path, and a stray module in the operator's would
            # shadow the image's packages.
            self.proc = subprocess.Popen(
                argv or ["/bin/false"],
                env=full_env,
                cwd=self.folder,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            self._write_line(f"failed to start container: {argv!r}: {e}")
            self.exit_code = START_ERROR_EXIT_CODE
            self.started = self.finished = now
            return False
        self.started = now
        self._pump = threading.Thread(
            target=self._pump_log, daemon=True, name=f"log-{self.proc.pid}"
        )
        self._pump.start()
        self.simulate_oom(full_env)
        return True

    def _write_line(self, text: str, stream: str = "stdout") -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as out:
            out.write(f"{cri_time()} {stream} F {text}\n")

    def _pump_log(self) -> None:
        """Copy the process's output into the log, one CRI line per line (time, stream, tag)."""
        assert self.proc is not None and self.proc.stdout is not None
        with self.log_path.open("ab", buffering=0) as out:
            for raw in iter(self.proc.stdout.readline, b""):
                text = raw.rstrip(b"\n")
                out.write(cri_time().encode() + b" stdout F " + text + b"\n")

    def simulate_oom(self, env: dict[str, str]) -> None:
        try:
            peak = float(env.get(PEAK_MEMORY_ENV) or 0) * GIB
        except ValueError:
            return
        limit = self.memory_limit_bytes() or self.memory_request_bytes()
        if peak and limit and peak > limit:
            self.oom_kill()

    def oom_kill(self) -> None:
        self.oom_killed = True
        self.signal(signal.SIGKILL)

    def signal(self, sig: int) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM now, SIGKILL once the grace period is over."""
        deadline = time.monotonic() + max(grace_seconds, 0.0)
        self.kill_at = deadline if self.kill_at is None else min(self.kill_at, deadline)
        self.signal(signal.SIGTERM)

    def poll(self) -> int | None:
        """The exit code once the process has ended (what it left behind is killed)."""
        if self.exit_code is not None:
            return self.exit_code
        if self.proc is None:
            return None
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            self.signal(signal.SIGKILL)
        self.usage.sample(self.proc.pid)
        limit = self.memory_limit_bytes()
        if limit and self.usage.peak_bytes > limit and not self.oom_killed:
            self.oom_kill()
        if self.proc.poll() is None:
            return None
        try:  # like a container runtime: kill whatever the main process left behind
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self._pump is not None:
            self._pump.join(timeout=2.0)
        self.exit_code = exit_code_of(self.proc.returncode)
        self.finished = datetime.now(UTC)
        return self.exit_code

    def kill_now(self) -> None:
        """SIGKILL and reap (the node itself went away)."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                pass

    def runtime_s(self) -> float:
        if self.started is None:
            return 0.0
        end = self.finished or datetime.now(UTC)
        return max(0.0, (end - self.started).total_seconds())


def cri_time() -> str:
    """The CRI log's timestamp: RFC 3339 with nanoseconds, UTC."""
    now = time.time_ns()
    secs, nanos = divmod(now, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{nanos:09d}Z"


def write_volume(folder: Path, files: dict[str, bytes]) -> Path:
    """Write a volume's files (key -> content) into `folder`, replacing what was there."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, data in files.items():
        path = folder / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


def secret_files(obj: dict[str, Any]) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}


def config_map_files(obj: dict[str, Any]) -> dict[str, bytes]:
    out = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return out


def remap(env: dict[str, str], mounts: dict[str, Path]) -> dict[str, str]:
    """`env` with every value under a mount path pointing at the folder or file written for
    it (`mounts`: mountPath -> local path)."""
    out = dict(env)
    for path, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        for key, value in env.items():
            if value == path or value.startswith(path.rstrip("/") + "/"):
                out[key] = str(local) + value[len(path.rstrip("/")) :]
    return out
