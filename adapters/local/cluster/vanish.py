"""Pods that vanish from the API, as Kubernetes removes them (docs/architecture.md#the-local-stack).

A pod object goes away, its `kubectl logs` with it, when:
- the Job controller deleted it (scale-down, suspend, Job finished with pods active) and it
  has terminated: the Job controller has accounted for it, removes its finalizer, gone;
- the pod garbage collector finds more terminated pods than `terminated-pod-gc-threshold`
  (GKE sets 1000; upstream's default is 12500): the oldest terminated pods are deleted;
- its node is lost: pod GC deletes pods bound to a node that no longer exists (marking them
  Failed with the DisruptionTarget condition first, so the Job replaces them).

Called under the cluster's lock. A vanished pod's log file is deleted: the logs die with the
pod (on GKE they survive only in Cloud Logging, which the local stack does not model).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from adapters.local.cluster.jobs import LocalJob
from adapters.local.cluster.pods import LocalPod

log = logging.getLogger("cave_pipeline.local_cluster")

GKE_POD_GC_THRESHOLD = 1000


@dataclass(frozen=True)
class Terminated:
    """A terminated pod as the garbage collector sorts it."""

    name: str
    created: datetime
    evicted: bool = False


def gc_victims(terminated: Iterable[Terminated], threshold: int) -> list[str]:
    """Names of the terminated pods the pod GC deletes: the excess over `threshold`, evicted
    (DisruptionTarget) pods first, then the oldest by creation (Kubernetes' order)."""
    pods = sorted(terminated, key=lambda p: (not p.evicted, p.created, p.name))
    return [p.name for p in pods[: max(len(pods) - max(threshold, 0), 0)]]


def forget(job: LocalJob, pod: LocalPod) -> None:
    """Remove a pod object from its Job's listing, its log file with it."""
    job.pods.remove(pod)
    job.dirty = True
    pod.log_path.unlink(missing_ok=True)


def remove_deleted(jobs: Iterable[LocalJob]) -> list[str]:
    """Terminated pods the Job controller had deleted: gone from the API. Their names."""
    gone = []
    for job in jobs:
        for pod in [p for p in job.pods if p.terminal and p.deleting]:
            forget(job, pod)
            gone.append(pod.name)
    return gone


def collect_garbage(jobs: Iterable[LocalJob], threshold: int) -> list[str]:
    """The pod GC's pass: delete terminated pods beyond `threshold`. Their names."""
    owners = {p.name: (job, p) for job in jobs for p in job.pods if p.terminal}
    candidates = [
        Terminated(name, pod.created, pod.reason == "DisruptionTarget")
        for name, (_, pod) in owners.items()
    ]
    victims = gc_victims(candidates, threshold)
    for name in victims:
        forget(*owners[name])
    if victims:
        log.info("pod GC deleted %d terminated pods (threshold %d)", len(victims), threshold)
    return victims


def lose_node(
    jobs: Iterable[LocalJob], names: set[str] | None, now: datetime, keep_running: bool
) -> tuple[list[str], list[LocalPod]]:
    """A lost node: its pods (all pods holding resources, or those named) are marked Failed
    with DisruptionTarget, accounted by their Job, and deleted with their logs. Returns the
    pods whose processes still run (`keep_running`: a node cut off from the API but not from
    Bigtable); otherwise they are SIGKILLed. Returns the names of the pods lost, and those
    of them with a process, which the caller reaps without accounting them (`reap_lost`)."""
    gone: list[str] = []
    lost: list[LocalPod] = []
    for job in jobs:
        for pod in [p for p in job.pods if not p.terminal]:
            if names is not None and pod.name not in names:
                continue
            if names is None and pod.proc is None:
                continue  # Pending pods are not bound to the lost node
            pod.disrupted, pod.reason = True, "DisruptionTarget"
            job.on_pod_exit(pod, None, now)
            log.info("pod %s lost with its node%s", pod.name, " (still running)" * keep_running)
            if not keep_running:
                pod.signal_group(signal.SIGKILL)
            if pod.proc is not None:
                lost.append(pod)
            forget(job, pod)
            gone.append(pod.name)
    return gone, lost


def reap_lost(pods: list[LocalPod]) -> None:
    """Forget the processes of lost pods once they have ended (nothing is accounted)."""
    for pod in list(pods):
        if pod.poll() is not None:
            pods.remove(pod)
