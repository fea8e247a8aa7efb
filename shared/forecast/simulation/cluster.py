"""A simulated GKE Autopilot cluster of Indexed Jobs, on a simulated clock. Pure module.

What it reproduces, because the controller's behaviour depends on it: pods start after a
node start-up delay when no warm node has room; Spot preemptions end a pod without using a
retry (the index is run again, its next pod doing only the chunks the ended one had not
finished: the worker's done markers keep them); other failures keep their finished chunks
too, and use the index's retries
(`backoffLimitPerIndex`), then fail the index, and too many failed indexes fail the Job;
the Job's own events pass Kubernetes' recorder rate limit (a burst of 25, then one per 5
minutes per Job) or are dropped. Pods are simulated one per batch, never per chunk.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.forecast.simulation.runtimes import PodRun
from shared.model import intervals
from shared.ports.cluster import JobStatus

EVENT_BURST, EVENT_REFILL_S = 25, 300.0


@dataclass
class TokenBucket:
    """Kubernetes' event recorder limit for one involved object."""

    tokens: float = EVENT_BURST
    at: float = 0.0

    def take(self, now: float) -> bool:
        self.tokens = min(EVENT_BURST, self.tokens + (now - self.at) / EVENT_REFILL_S)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


@dataclass
class SimJob:
    name: str
    key: str  # layer key
    completions: int
    parallelism: int
    suspended: bool
    retries: int
    max_failed: int
    chunks_per_batch: int
    cpu: float
    memory_gib: float
    created: float
    next_index: int = 0
    retry_queue: list[int] = field(default_factory=list)
    attempts_failed: dict[int, int] = field(default_factory=dict)
    # index -> chunks its ended pod left undone (absent: the whole batch)
    chunks_left: dict[int, int] = field(default_factory=dict)
    active: int = 0
    done: int = 0
    failed: set[int] = field(default_factory=set)
    condition: str | None = None
    finished_at: float | None = None
    bucket: TokenBucket = field(default_factory=TokenBucket)
    # accounting, as pod records would give it
    cpu_s: float = 0.0
    mem_s: float = 0.0
    pods_succeeded: int = 0
    pods_failed: int = 0
    pods_preempted: int = 0
    succeeded_runtime_s: float = 0.0
    pods: int = 0

    def work_left(self) -> bool:
        return bool(self.retry_queue) or self.next_index < self.completions


@dataclass
class ClusterParams:
    node_startup_s: float = 60.0  # Autopilot provisioning a node for a pending pod
    warm_start_s: float = 3.0  # a pod on a node that has room
    node_idle_s: float = 600.0  # unused nodes are removed after this
    preemptions_per_hour: float = 0.0  # per running pod
    failure_rate: float = 0.0  # per attempt, transient (uses a retry)


class SimCluster:
    """Jobs, pods as scheduled completions, nodes as a warm capacity."""

    def __init__(self, params: ClusterParams, rng: random.Random, t0: datetime) -> None:
        self.params, self.rng, self.t0 = params, rng, t0
        self.jobs: dict[str, SimJob] = {}
        self.capacity = 0  # pods the current nodes can hold
        self.in_use = 0
        self.idle_since: float | None = 0.0
        self.events_emitted = self.events_dropped = 0

    def at(self, t: float) -> datetime:
        return self.t0 + timedelta(seconds=t)

    def emit(self, job: SimJob, now: float) -> bool:
        """A Job event: True if it survives the recorder's rate limit."""
        self.events_emitted += 1
        if job.bucket.take(now):
            return True
        self.events_dropped += 1
        return False

    def start_pods(
        self,
        job: SimJob,
        now: float,
        runtime: Callable[[SimJob, int], PodRun],
    ) -> list[tuple[float, str, int, str, float]]:
        """Start pods up to the Job's parallelism; returns (end time, job, index, outcome,
        billed seconds) for each. `runtime(job, chunks)` is a pod's run of `chunks` of its
        batch."""
        out = []
        if job.suspended or job.condition:
            return out
        if self.idle_since is not None and now - self.idle_since > self.params.node_idle_s:
            self.capacity = self.in_use  # idle nodes were removed
        while job.active < job.parallelism and job.work_left():
            index = job.retry_queue.pop() if job.retry_queue else job.next_index
            if index == job.next_index:
                job.next_index += 1
            delay = self.params.warm_start_s
            if self.in_use >= self.capacity:
                delay = self.params.node_startup_s
                self.capacity = self.in_use + 1
            self.in_use += 1
            self.idle_since = None
            job.active += 1
            job.pods += 1
            chunks = job.chunks_left.pop(index, job.chunks_per_batch)
            run = runtime(job, chunks)
            run_s = run.seconds
            outcome = "ok"
            if self.params.preemptions_per_hour > 0:
                cut = self.rng.expovariate(self.params.preemptions_per_hour / 3600.0)
                if cut < run_s:
                    run_s, outcome = cut, "preempted"
            if outcome == "ok" and self.rng.random() < self.params.failure_rate:
                run_s, outcome = self.rng.uniform(0, run_s), "failed"
            if outcome != "ok":
                job.chunks_left[index] = chunks - chunks_finished(chunks, run, run_s)
            out.append((now + delay + run_s, job.name, index, outcome, run_s))
        return out

    def pod_done(self, job: SimJob, index: int, outcome: str, run_s: float, now: float) -> None:
        job.active -= 1
        self.in_use -= 1
        if self.in_use == 0:
            self.idle_since = now
        job.cpu_s += job.cpu * run_s
        job.mem_s += job.memory_gib * run_s
        if outcome == "ok":
            job.done += 1
            job.pods_succeeded += 1
            job.succeeded_runtime_s += run_s
        elif outcome == "preempted":
            job.pods_preempted += 1
            job.retry_queue.append(index)  # DisruptionTarget: ignored, no retry used
        else:
            job.pods_failed += 1
            n = job.attempts_failed[index] = job.attempts_failed.get(index, 0) + 1
            if n > job.retries:
                job.failed.add(index)
            else:
                job.retry_queue.append(index)
        if job.condition is None:
            if len(job.failed) > job.max_failed:
                job.condition, job.finished_at = "Failed", now
            elif job.done + len(job.failed) == job.completions and job.active == 0:
                job.condition = "Complete" if not job.failed else "Failed"
                job.finished_at = now

    def status(self, name: str) -> JobStatus | None:
        job = self.jobs.get(name)
        if job is None:
            return None
        # Only the count of completed indexes matters to the decision: a prefix stands in
        # for the real (scattered) set, so nothing is materialised per batch.
        done = f"0-{job.done - 1}" if job.done > 1 else ("0" if job.done else "")
        return JobStatus(
            name=name,
            labels={},
            annotations={},
            completions=job.completions,
            parallelism=job.parallelism,
            suspended=job.suspended,
            active=job.active,
            completed_indexes=done,
            failed_indexes=intervals.format(job.failed),
            condition=job.condition,
            reason="FailedIndexes" if job.condition == "Failed" else None,
            completion_time=self.at(job.finished_at) if job.finished_at is not None else None,
        )


def chunks_finished(chunks: int, run: PodRun, ended_s: float) -> int:
    """Chunks of a pod's `chunks` done when it ended `ended_s` into `run`: the chunk under
    way is lost, the others are kept by their done markers. Never all of them: the pod ended
    before its run's end."""
    start = min(run.startup_s, run.seconds)
    work_s = run.seconds - start
    if chunks <= 0 or work_s <= 0:
        return 0
    done = int(chunks * max(0.0, ended_s - start) / work_s)
    return min(done, chunks - 1)
