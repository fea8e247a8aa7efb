"""Pod attempts of the local cluster: one subprocess each, in its own process group.

A pod's container command runs with the Job's env plus `JOB_COMPLETION_INDEX`; stdout and
stderr go to `<state_dir>/pods/<pod>.log`, kept after the pod ends. Exit codes follow the
container runtime: a process killed by signal N exits 128+N (SIGTERM 143, SIGKILL 137).
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from adapters.local.cluster.spec import COMPLETION_INDEX_FIELDS, JobSpec
from adapters.local.kubelet.proc_usage import LifeUsage
from shared.ports.cluster import PodInfo

log = logging.getLogger("cave_pipeline.local_cluster")

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz"  # lowercase, no vowels (no accidental words)
_VAR_REF = re.compile(r"\$(\$|\(([A-Za-z_][A-Za-z0-9_.-]*)\))")
START_ERROR_EXIT_CODE = 128
# Fault injection: a pod whose env sets this peak (GiB) above its memory request is killed
# by the simulated OOM killer (SIGKILL, exit 137, reason OOMKilled), as a container over its
# memory limit would be; a pod with enough memory runs normally.
PEAK_MEMORY_ENV = "LOCAL_POD_PEAK_MEMORY_GIB"


def pod_name(job_name: str, index: int, rng: random.Random) -> str:
    """`<job>-<index>-<5 random chars>`, like the Job controller's generateName."""
    return f"{job_name}-{index}-" + "".join(rng.choice(_NAME_ALPHABET) for _ in range(5))


def exit_code_of(returncode: int) -> int:
    """A Popen return code as a container exit code (signal N -> 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


def container_env(spec: JobSpec, index: int, name: str, namespace: str) -> dict[str, str]:
    """The env the manifest gives the container, fieldRefs resolved, plus the index."""
    fields = {"metadata.name": name, "metadata.namespace": namespace}
    fields.update({f: str(index) for f in COMPLETION_INDEX_FIELDS})
    env: dict[str, str] = {}
    for var in spec.env:
        if var.field_path is None:
            env[var.name] = _expand(var.value or "", env)
        elif var.field_path in fields:
            env[var.name] = fields[var.field_path]
        else:
            log.warning("pod %s: fieldRef %s is not resolved locally", name, var.field_path)
    env["JOB_COMPLETION_INDEX"] = str(index)
    return env


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command, args and env values ($$ escapes)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) == "$":
            return "$"
        return env.get(m.group(2), m.group(0))

    return _VAR_REF.sub(sub, text)


def container_argv(spec: JobSpec, env: dict[str, str]) -> list[str]:
    argv = [_expand(a, env) for a in spec.argv]
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


@dataclass(eq=False)
class LocalPod:
    """One pod attempt. Mutated only under the cluster's lock."""

    name: str
    uid: str
    job_name: str
    index: int
    cpu: float
    memory_gib: float
    created: datetime
    log_path: Path
    grace_seconds: float
    labels: dict[str, str] = field(default_factory=dict)
    phase: str = "Pending"
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int | None = None
    reason: str | None = None
    node: str = ""
    deleting: bool = False  # deleted by the Job controller (scale-down, suspend, Job end)
    disrupted: bool = False  # carries the DisruptionTarget condition (preempted)
    unschedulable_reported: bool = False
    proc: subprocess.Popen[bytes] | None = None
    kill_at: float | None = None  # time.monotonic() deadline for SIGKILL
    oom_killed: bool = False  # SIGKILLed by the simulated OOM killer (PEAK_MEMORY_ENV)
    # Set by a kubelet's node-pressure eviction (`LocalCluster.evict_pod`): the
    # DisruptionTarget condition's reason and message, and the pod's status.reason/message.
    disruption_reason: str | None = None
    disruption_message: str | None = None
    status_reason: str | None = None
    status_message: str | None = None
    # Its peak memory and CPU over its life, from /proc (PodInfo.peak_memory_gib, cpu_used).
    usage: LifeUsage = field(default_factory=LifeUsage)

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def terminating(self) -> bool:
        return not self.terminal and (self.deleting or self.disrupted)

    @property
    def active(self) -> bool:
        """Counts in `.status.active`: not finished and not being deleted."""
        return not self.terminal and not self.terminating

    @property
    def holds_resources(self) -> bool:
        return self.proc is not None and not self.terminal

    def spawn(self, argv: list[str], env: dict[str, str], now: datetime, node: str) -> bool:
        """Start the container process; False (log says why) if it cannot be started."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as out:
            try:
                # The pod's working directory is its log folder, not the operator's: with
                # `python -m`, the working directory comes first on sys.path, and a stray
                # module there (say /tmp/proto.py) would shadow the image's packages.
                self.proc = subprocess.Popen(
                    argv,
                    env=env,
                    cwd=self.log_path.parent,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as e:
                out.write(f"failed to start container: {argv!r}: {e}\n".encode())
                log.error("pod %s: cannot start %r: %s", self.name, argv, e)
                return False
        self.phase, self.started, self.node, self.reason = "Running", now, node, None
        log.debug("pod %s started (pid %d): %s", self.name, self.proc.pid, argv)
        return True

    def simulate_oom(self, env: dict[str, str]) -> bool:
        """Kill the pod as the OOM killer would if its env asks for more memory than its
        request (PEAK_MEMORY_ENV); True if it was."""
        try:
            peak = float(env.get(PEAK_MEMORY_ENV) or 0)
        except ValueError:
            log.warning("pod %s: %s=%r is not a number", self.name, PEAK_MEMORY_ENV, env)
            return False
        if peak <= self.memory_gib:
            return False
        self.oom_killed = True
        self.signal_group(signal.SIGKILL)
        log.info("pod %s OOMKilled (peak %g GiB > %g GiB)", self.name, peak, self.memory_gib)
        return True

    def signal_group(self, sig: int) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM the process group now, SIGKILL once the grace period is over."""
        deadline = time.monotonic() + max(grace_seconds, 0.0)
        self.kill_at = deadline if self.kill_at is None else min(self.kill_at, deadline)
        self.signal_group(signal.SIGTERM)

    def poll(self) -> int | None:
        """The container exit code once the process has ended (stragglers are killed)."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                self.signal_group(signal.SIGKILL)
            pgid = self.proc.pid
            self.usage.sample(pgid)
            if self.proc.poll() is None:
                return None
            try:  # like a container runtime, kill whatever the main process left behind
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return exit_code_of(self.proc.returncode)

    def info(self) -> PodInfo:
        return PodInfo(
            name=self.name,
            uid=self.uid,
            job_name=self.job_name,
            index=self.index,
            phase=self.phase,
            cpu_request=self.cpu,
            memory_request_gib=self.memory_gib,
            created=self.created,
            started=self.started,
            finished=self.finished,
            exit_code=self.exit_code,
            reason=self.reason,
            node=self.node,
            labels=dict(self.labels),
            disruption_reason=self.disruption_reason,
            status_reason=self.status_reason,
            peak_memory_gib=self.usage.peak_memory_gib(),
            cpu_used=self.usage.cpu_used(self._runtime_s()),
        )

    def _runtime_s(self) -> float:
        if self.started is None:
            return 0.0
        end = self.finished or datetime.now(self.started.tzinfo)
        return max(0.0, (end - self.started).total_seconds())
