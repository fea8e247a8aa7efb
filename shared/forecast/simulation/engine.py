"""The build simulator: a heap-based event loop on a simulated clock that drives the real
pure decision (`decide`: ramp, gating, approvals, budget guard) against `SimCluster`. Pure.

Triggers are what production has: the heartbeat every `tick_period_s`, and the Job events
that survive Kubernetes' rate limit, delivered through the log sink after `sink_delay_s` and
coalesced (shared.ports.coalesce: an event older than the last reconcile is covered). Each
reconcile is priced in function invocations and Firestore reads/writes the way the
controller does them (one run document, its layers, pod records in pages of 1,000).
"""

from __future__ import annotations

import copy
import heapq
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.config.config import PipelineConfig
from shared.forecast.simulation.cluster import ClusterParams, SimCluster, SimJob
from shared.forecast.simulation.runtimes import PodRun, Runtimes
from shared.model.grid import layer_batch_size
from shared.model.layers import layer_shape
from shared.model.phase import Phase, RunStatus
from shared.model.state import RunState, layer_key
from shared.money.costs import RunCost, estimate
from shared.money.pricing import RateRow, load_rates
from shared.reconcile.bigtable_load import Overload
from shared.reconcile.build_plan import layer_plan, plan_for
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, CreateJob, DeleteJob, PatchJob, Plan, Snapshot

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POD_PAGE = 1000  # pod records per Firestore document (the store's page)


@dataclass(frozen=True)
class SimSettings:
    cluster: ClusterParams = field(default_factory=ClusterParams)
    runtimes: Runtimes = field(default_factory=Runtimes)
    sink_delay_s: float = 20.0  # Job event -> log sink -> Pub/Sub -> function
    approve_after_s: float = 300.0  # approve mode: an operator's reaction time
    seed: int = 1
    max_sim_s: float = 90 * 86400.0  # give up after this much simulated time
    # A busy Bigtable during parts of the build (the ramp's gate; empty: never busy).
    bigtable_overload: tuple[Overload, ...] = ()


@dataclass
class LayerReport:
    key: str
    batches: int
    chunks: int
    wall_s: float
    pods: int
    preempted: int
    failed: int


@dataclass
class SimReport:
    status: str
    chunks: int
    wall_s: float
    cost_usd: float
    pods: int
    function_invocations: int
    reconciles: int
    firestore_reads: int
    firestore_writes: int
    job_events: int
    events_dropped: int  # by Kubernetes' rate limit
    events_covered: int  # delivered, but a reconcile had already seen their news
    layers: list[LayerReport]
    run: RunState
    # (elapsed_s, layer key) each time a layer finished, for forecasts
    layer_finishes: list[tuple[float, str]] = field(default_factory=list)
    # With a Bigtable overload: (elapsed_s, load, running layers' parallelism, why the ramp
    # holds) at each reconcile where one of them changed.
    ramp_timeline: list[tuple[float, float | None, int, str]] = field(default_factory=list)
    # The cost by layer and the cluster fee (cost_usd is its total), for the whole bill.
    run_cost: RunCost | None = None


def decide_step(
    run: RunState,
    jobs,
    now: datetime,
    plan: Plan,
    rates: tuple[RateRow, ...] | None,
    bigtable_load: float | None = None,
):
    """THE coupling point to the controller's decision: everything the simulator knows about
    `decide`'s signature is here. `plan` is `plan_for(cfg, run)`, computed once per
    simulation; pods are not observed (the simulator keeps the accounting: see _account)."""
    return decide(Snapshot(run, jobs, bigtable_load=bigtable_load), plan, rates, now)


class Simulation:
    def __init__(self, cfg: PipelineConfig, run: RunState, settings: SimSettings) -> None:
        # A canary's Job is not modelled: it forecasts from one (shared.forecast.canary_forecast).
        cfg = cfg.model_copy(
            update={"controller": cfg.controller.model_copy(update={"canary_chunks": None})}
        )
        self.cfg, self.s = cfg, settings
        # The decision never reads the config snapshots, and every reconcile copies and
        # compares the run document: the simulator keeps `cfg` instead.
        self.run = copy.copy(run)
        self.run.config, self.run.dataset = {}, {}
        # Setup passes are one short pod each: the simulation models the layers only.
        self.run.setups = {}
        self.rng = random.Random(settings.seed)
        self.cluster = SimCluster(settings.cluster, self.rng, T0)
        self.heap: list[tuple[float, int, str, tuple]] = []
        self.seq = 0
        self.last_read = -1.0
        self.counts = dict.fromkeys(("invocations", "reconciles", "reads", "writes", "covered"), 0)
        self.finished_pods: dict[str, int] = {}
        self.layer_finishes: list[tuple[float, str]] = []
        self.ramp_timeline: list[tuple[float, float | None, int, str]] = []
        self.plan = plan_for(cfg, run)
        self.plans = self.plan.layers
        self.rates = load_rates()

    def push(self, t: float, kind: str, *payload) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    # ---- the controller side ------------------------------------------------------------
    def _account(self) -> None:
        """Copy the cluster's usage into the layers, as the pod records would."""
        for job in self.cluster.jobs.values():
            ls = self.run.layers[job.key]
            if ls.job.name != job.name:
                continue
            ls.pods.cpu_seconds, ls.pods.memory_gib_seconds = job.cpu_s, job.mem_s
            ls.pods.succeeded, ls.pods.failed = job.pods_succeeded, job.pods_failed
            ls.pods.preempted, ls.pods.succeeded_runtime_s = (
                job.pods_preempted,
                job.succeeded_runtime_s,
            )

    def reconcile(self, now: float) -> None:
        self.counts["invocations"] += 1
        self.counts["reconciles"] += 1
        self.counts["reads"] += 2 + len(self.run.layers)  # run, layers, version check
        self.last_read = now
        before = {k: (ls.phase, ls.job.parallelism) for k, ls in self.run.layers.items()}
        self._account()
        running = [ls.job.name for ls in self.run.layers.values() if ls.phase == Phase.RUNNING]
        jobs = {name: self.cluster.status(name) for name in running}
        overload = self.s.bigtable_overload
        load = next((o.load for o in overload if o.at(now) is not None), None)
        d = decide_step(self.run, jobs, self.cluster.at(now), self.plan, self.rates, load)
        if d.changed:
            changed = sum(
                1 for k, ls in d.state.layers.items() if (ls.phase, ls.job.parallelism) != before[k]
            )
            pages = 0
            for job in self.cluster.jobs.values():
                new = job.pods - job.active - self.finished_pods.get(job.name, 0)
                self.finished_pods[job.name] = job.pods - job.active
                pages += math.ceil(new / POD_PAGE) if new > 0 else 0
            self.counts["writes"] += 1 + max(1, changed) + pages
        self.run = d.state
        for ls in self.run.layers.values():
            if ls.phase in (Phase.SUCCEEDED, Phase.FAILED) and before[ls.key][0] == Phase.RUNNING:
                self.layer_finishes.append((now, ls.key))
        if overload:
            self._note_ramp(now, load)
        for action in d.actions:
            if isinstance(action, CreateJob):
                self._create(action, now)
            elif isinstance(action, PatchJob):
                job = self.cluster.jobs.get(action.job_name)
                if job is not None:
                    if action.parallelism is not None:
                        job.parallelism = action.parallelism
                    if action.suspend is not None:
                        job.suspended = action.suspend
                    self._fill(job, now)
            elif isinstance(action, DeleteJob):
                self.cluster.jobs.pop(action.job_name, None)
            elif isinstance(action, Alert):
                self.counts["writes"] += 1
                if action.kind == "approval_needed":
                    self.push(now + self.s.approve_after_s, "approve", action.stage, action.layer)

    def _note_ramp(self, now: float, load: float | None) -> None:
        """One timeline entry when the load, the parallelism or the hold changed."""
        running = [ls for ls in self.run.layers.values() if ls.phase == Phase.RUNNING]
        entry = (now, load, sum(ls.job.parallelism for ls in running), self.run.ramp_hold)
        if not self.ramp_timeline or self.ramp_timeline[-1][1:] != entry[1:]:
            self.ramp_timeline.append(entry)

    def _create(self, action: CreateJob, now: float) -> None:
        if action.job_name in self.cluster.jobs:
            return
        ls = self.run.layers[layer_key(action.stage, action.layer)]
        plan = self.plans[ls.key]
        job_cfg = self.cfg.job.for_stage(ls.stage)
        job = SimJob(
            name=action.job_name,
            key=ls.key,
            completions=plan.completions,
            parallelism=action.parallelism,
            suspended=action.suspend,
            retries=job_cfg.task_retries,
            max_failed=min(job_cfg.max_failed_tasks, plan.completions),
            chunks_per_batch=layer_batch_size(job_cfg.batch_size, ls.layer),
            cpu=plan.cpu,
            memory_gib=plan.memory_gib,
            created=now,
        )
        self.cluster.jobs[job.name] = job
        self._fill(job, now)

    def _fill(self, job: SimJob, now: float) -> None:
        def runtime(j: SimJob, chunks: int) -> PodRun:
            return self.s.runtimes.pod_run(self.rng, j.key, chunks, j.chunks_per_batch)

        before = job.pods
        for end, name, index, outcome, run_s in self.cluster.start_pods(job, now, runtime):
            self.push(end, "pod", name, index, outcome, run_s)
        # One SuccessfulCreate per pod: only the survivors of the rate limit are delivered.
        for _ in range(job.pods - before):
            if self.cluster.emit(job, now):
                self.push(now + self.s.sink_delay_s, "event", now)

    # ---- the loop -----------------------------------------------------------------------
    def run_to_end(self) -> SimReport:
        tick = self.cfg.controller.tick_period_s
        self.reconcile(0.0)  # the operator's start kick
        self.push(tick, "tick")
        now = 0.0
        while self.heap and self.run.status not in (RunStatus.SUCCEEDED, RunStatus.FAILED):
            now, _, kind, payload = heapq.heappop(self.heap)
            if now > self.s.max_sim_s or self._halted():
                break
            if kind == "pod":
                name, index, outcome, run_s = payload
                job = self.cluster.jobs.get(name)
                if job is None:
                    continue
                self.cluster.pod_done(job, index, outcome, run_s, now)
                if job.condition and self.cluster.emit(job, now):
                    self.push(now + self.s.sink_delay_s, "event", now)
                self._fill(job, now)
            elif kind == "tick":
                self.reconcile(now)
                self.push(now + tick, "tick")
            elif kind == "event":
                (happened,) = payload
                self.counts["invocations"] += 1
                if happened <= self.last_read:
                    self.counts["covered"] += 1  # coalesced: already seen
                else:
                    self.counts["invocations"] -= 1  # counted by reconcile()
                    self.reconcile(now)
            elif kind == "approve":
                stage, layer = payload
                ls = self.run.layers[layer_key(stage, layer)]
                ls.approval.granted, ls.approval.by, ls.approval.at = (
                    True,
                    "simulated",
                    self.cluster.at(now),
                )
                self.counts["writes"] += 1
                self.reconcile(now)  # the approval's kick
        return self._report(now)

    def _halted(self) -> bool:
        """Paused by the budget guard with nothing left running: an operator's call now."""
        return (
            self.run.status == RunStatus.PAUSED
            and self.run.budget_alerted
            and all(job.active == 0 for job in self.cluster.jobs.values())
        )

    def _report(self, now: float) -> SimReport:
        self._account()
        layers = []
        for key, ls in self.run.layers.items():
            job = next((j for j in self.cluster.jobs.values() if j.key == key), None)
            start = ls.timing.submitted_at
            end = ls.timing.finished_at
            wall = (end - start).total_seconds() if start and end else 0.0
            chunks = math.prod(layer_shape(self.cfg.layer2_shape(), ls.layer))
            layers.append(
                LayerReport(
                    key,
                    self.plans[key].completions,
                    chunks,
                    wall,
                    job.pods if job else 0,
                    job.pods_preempted if job else 0,
                    job.pods_failed if job else 0,
                )
            )
        end_at = self.run.finished_at or self.cluster.at(now)
        cost = estimate(self.cfg, self.run, self.rates, end_at)
        return SimReport(
            status=self.run.status,
            chunks=sum(lr.chunks for lr in layers),
            wall_s=(end_at - T0).total_seconds(),
            cost_usd=cost.usd,
            pods=sum(lr.pods for lr in layers),
            function_invocations=self.counts["invocations"],
            reconciles=self.counts["reconciles"],
            firestore_reads=self.counts["reads"],
            firestore_writes=self.counts["writes"],
            job_events=self.cluster.events_emitted,
            events_dropped=self.cluster.events_dropped,
            events_covered=self.counts["covered"],
            layers=layers,
            run=self.run,
            layer_finishes=self.layer_finishes,
            ramp_timeline=self.ramp_timeline,
            run_cost=cost,
        )


def simulate(
    cfg: PipelineConfig, run: RunState, settings: SimSettings = SimSettings()
) -> SimReport:
    """Simulate a whole build of `run` (fresh, from shared.reconcile.build_plan.new_run) to its
    end."""
    return Simulation(cfg, run, settings).run_to_end()


__all__ = ["SimReport", "SimSettings", "simulate", "decide_step", "layer_plan"]
