"""The local cluster's one node: the scheduler's fit check and the kubelet's pod handling.

Pods are placed by their requests against the node's capacity minus what pods holding
resources request (running ones, terminating ones included, until their process has gone);
one that does not fit stays Pending with a FailedScheduling event and is retried every pass.
Called under the cluster's lock.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from adapters.local.cluster.events import EventSink
from adapters.local.cluster.jobs import LocalJob
from adapters.local.cluster.mounts import remap_env
from adapters.local.cluster.pods import (
    START_ERROR_EXIT_CODE,
    LocalPod,
    container_argv,
    container_env,
)

log = logging.getLogger("cave_pipeline.local_cluster")
PROJECT_ROOT = Path(__file__).resolve().parents[3]  # the checkout the pods run from

NODE_NAME = "local-node"
_EPS = 1e-9


def place(
    pending: list[LocalPod], holding: list[LocalPod], cpu: float, memory_gib: float
) -> list[tuple[LocalPod, list[str]]]:
    """Fit Pending pods (oldest first) on a node of the given capacity, next to the pods
    already holding resources. For each pod: what it lacks ([] means: start it now)."""
    free = {
        "cpu": cpu - sum(p.cpu for p in holding),
        "memory": memory_gib - sum(p.memory_gib for p in holding),
    }
    out: list[tuple[LocalPod, list[str]]] = []
    for pod in sorted(pending, key=lambda p: p.created):
        need = {"cpu": pod.cpu, "memory": pod.memory_gib}
        short = [what for what in ("cpu", "memory") if need[what] > free[what] + _EPS]
        if not short:
            for what in free:
                free[what] -= need[what]
        out.append((pod, short))
    return out


class LocalNode:
    def __init__(
        self,
        *,
        pods_dir: Path,
        capacity_cpu: float,
        capacity_memory_gib: float,
        extra_env: dict[str, str],
        namespace: str,
        events: EventSink,
        objects_dir: Path | None = None,
    ) -> None:
        self.pods_dir = pods_dir
        self.capacity_cpu = capacity_cpu
        self.capacity_memory_gib = capacity_memory_gib
        self.extra_env = dict(extra_env)
        self.namespace = namespace
        self.events = events
        self.objects_dir = objects_dir

    def reap(self, jobs: list[LocalJob], orphans: list[LocalPod], now: datetime) -> None:
        """Record every pod whose process has ended; SIGKILL those past their grace."""
        for job in jobs:
            for pod in job.live_pods():
                code = pod.poll()
                if code is not None:
                    log.debug("pod %s exited with %d", pod.name, code)
                    job.on_pod_exit(pod, code, now)
        for pod in list(orphans):  # pods of deleted Jobs
            code = pod.poll()
            if code is not None:
                pod.phase, pod.reason, pod.exit_code, pod.finished = "Failed", "Deleted", code, now
                orphans.remove(pod)
                pod.log_path.unlink(missing_ok=True)  # the pod object is gone, its logs too

    def schedule(self, jobs: list[LocalJob], orphans: list[LocalPod], now: datetime) -> None:
        """Start the Pending pods that fit; report the others once as FailedScheduling."""
        holding = [p for j in jobs for p in j.pods if p.holds_resources]
        holding += [p for p in orphans if p.holds_resources]
        owner = {
            pod: job
            for job in jobs
            if not (job.finished or job.suspended)
            for pod in job.pods
            if pod.phase == "Pending" and pod.active
        }
        for pod, short in place(list(owner), holding, self.capacity_cpu, self.capacity_memory_gib):
            job = owner[pod]
            if not short:
                self.start(job, pod, now)
            elif not pod.unschedulable_reported:
                pod.unschedulable_reported, pod.reason, job.dirty = True, "FailedScheduling", True
                lacking = ", ".join(f"1 Insufficient {what}" for what in short)
                message = f"0/1 nodes are available: {lacking}."
                self.events.record_pod_event(job, pod, "FailedScheduling", message)

    def start(self, job: LocalJob, pod: LocalPod, now: datetime) -> None:
        """Run the container: os.environ + extra_env + the manifest's env + the index."""
        job.dirty = True
        env = container_env(job.spec, pod.index, pod.name, self.namespace)
        if self.objects_dir is not None:  # mounted Secrets and ConfigMaps: their files
            env = remap_env(env, job.spec.mounts, self.objects_dir)
        argv = container_argv(job.spec, env)
        full_env = {**os.environ, **self.extra_env, **env, "HOSTNAME": pod.name}
        # The "image" is this checkout: its packages importable from any working directory.
        path = [str(PROJECT_ROOT), full_env.get("PYTHONPATH", "")]
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
        if not pod.spawn(argv, full_env, now, NODE_NAME):
            pod.reason = "StartError"
            job.on_pod_exit(pod, START_ERROR_EXIT_CODE, now)
            return
        pod.simulate_oom(env)

    def shut_down(self, pods: list[LocalPod], grace_cap: float, reap: Callable[[], None]) -> None:
        """Terminate pods (SIGTERM, SIGKILL after min(their grace, grace_cap)) and wait."""
        for pod in pods:
            pod.deleting = True
            pod.terminate(min(pod.grace_seconds, grace_cap))
        deadline = time.monotonic() + grace_cap + 5.0
        while any(p.holds_resources for p in pods) and time.monotonic() < deadline:
            reap()
            time.sleep(0.02)
        for pod in pods:
            if pod.holds_resources:
                log.error("pod %s did not exit after SIGKILL", pod.name)
