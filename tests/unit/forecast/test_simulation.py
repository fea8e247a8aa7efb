"""The build simulator (shared.forecast.simulation): the simulated cluster's Autopilot behaviour and
whole builds driven by the real decision."""

from __future__ import annotations

import random

import pytest

from shared.forecast.simulation.cluster import (
    ClusterParams,
    SimCluster,
    SimJob,
    TokenBucket,
    chunks_finished,
)
from shared.forecast.simulation.controller_cost import controller_cost
from shared.forecast.simulation.engine import T0, SimSettings, simulate
from shared.forecast.simulation.runtimes import PodRun, Runtimes, recorded_runtimes
from shared.model.state import LayerState, PodUsage, RunState
from shared.reconcile.build_plan import new_run
from tests.builders.demo_configs import demo_cfg


def job(**kw) -> SimJob:
    base = dict(
        name="j", key="ingest-L2", completions=10, parallelism=10, suspended=False, retries=1,
        max_failed=2, chunks_per_batch=1, cpu=1.0, memory_gib=1.0, created=0.0,
    )  # fmt: skip
    return SimJob(**{**base, **kw})


@pytest.mark.parametrize(
    ("times", "passed"),
    [
        ([0.0] * 26, 25),  # the burst, then dropped
        ([0.0] * 25 + [299.0], 25),  # not yet a token back
        ([0.0] * 25 + [300.0, 300.0], 26),  # one per 5 minutes
        ([0.0] * 25 + [3000.0], 26),  # refill does not bank more than... one per 300 s
    ],
)
def test_event_rate_limit(times, passed):
    bucket = TokenBucket()
    assert sum(bucket.take(t) for t in times) == passed


def test_token_bucket_refills_up_to_the_burst():
    bucket = TokenBucket()
    for _ in range(25):
        bucket.take(0.0)
    assert sum(bucket.take(10 * 86400.0) for _ in range(30)) == 25


def start(cluster: SimCluster, j: SimJob, now: float = 0.0):
    return cluster.start_pods(j, now, lambda _j, _chunks: PodRun(100.0, 0.0))


def test_new_pods_wait_for_nodes_then_reuse_them():
    cluster = SimCluster(ClusterParams(node_startup_s=60, warm_start_s=3), random.Random(1), T0)
    j = job(parallelism=2)
    cluster.jobs["j"] = j
    first = start(cluster, j)
    assert [round(end) for end, *_ in first] == [160, 160]  # two new nodes
    cluster.pod_done(j, first[0][2], "ok", 100.0, 160.0)
    (again,) = start(cluster, j, 160.0)
    assert again[0] == pytest.approx(160 + 3 + 100)  # a warm node had room


def test_preemption_uses_no_retry_but_failures_do():
    cluster = SimCluster(ClusterParams(), random.Random(1), T0)
    j = job(completions=1, parallelism=1, retries=1, max_failed=0)
    cluster.jobs["j"] = j
    for _ in range(5):
        (pod,) = start(cluster, j)
        cluster.pod_done(j, pod[2], "preempted", 10.0, 1.0)
    assert j.failed == set() and j.condition is None and j.pods_preempted == 5
    (pod,) = start(cluster, j)
    cluster.pod_done(j, pod[2], "failed", 10.0, 2.0)
    assert j.failed == set() and j.retry_queue == [0]  # one retry left
    (pod,) = start(cluster, j)
    cluster.pod_done(j, pod[2], "failed", 10.0, 3.0)
    assert j.failed == {0} and j.condition == "Failed"


@pytest.mark.parametrize(
    ("chunks", "full_s", "ended_s", "overhead_s", "done"),
    [
        (10, 110.0, 5.0, 10.0, 0),  # still starting: nothing done
        (10, 110.0, 50.0, 10.0, 4),  # 40 s of 100 s of work: 4 chunks, the 5th lost
        (10, 110.0, 109.9, 10.0, 9),  # ended in its last chunk: that one is lost
        (10, 110.0, 500.0, 10.0, 9),  # never all: the pod ended before its run's end
        (0, 10.0, 5.0, 10.0, 0),  # no chunks
        (4, 8.0, 6.0, 10.0, 0),  # a run shorter than the start-up: no work measured
        (4, 40.0, 20.0, 0.0, 2),  # no start-up modelled
    ],
)
def test_chunks_an_ended_pod_finished(chunks, full_s, ended_s, overhead_s, done):
    assert chunks_finished(chunks, PodRun(full_s, overhead_s), ended_s) == done


class _PreemptAt(random.Random):
    """Every pod is preempted `after` seconds into its run (when it runs that long)."""

    def __init__(self, after: float) -> None:
        super().__init__(1)
        self.after = after

    def expovariate(self, lambd: float) -> float:
        return self.after


def test_a_preempted_index_s_next_pod_does_only_the_chunks_left():
    """The worker's done markers keep a preempted pod's finished chunks: its index's next
    pod does the rest (a pod of an hour under a few preemptions an hour is not restarted
    from its first chunk every time, which took the simulated build 65 hours)."""
    cluster = SimCluster(ClusterParams(preemptions_per_hour=1.0), _PreemptAt(50.0), T0)
    j = job(completions=1, parallelism=1, chunks_per_batch=10)
    cluster.jobs["j"] = j
    asked: list[int] = []

    def runtime(_j: SimJob, chunks: int) -> PodRun:
        asked.append(chunks)
        return PodRun(10.0 + 10.0 * chunks, 10.0)  # 10 s of start-up, 10 s a chunk

    outcomes = []
    for _ in range(10):  # bounded: a model that restarts every pod from its first chunk never ends
        if j.condition is not None:
            break
        ((end, _, index, outcome, run_s),) = cluster.start_pods(j, 0.0, runtime)
        outcomes.append((outcome, run_s))
        cluster.pod_done(j, index, outcome, run_s, end)
    assert asked == [10, 6, 2]  # 4 chunks in 50 s, then 4 of 6, then the last 2 in 30 s
    assert outcomes == [("preempted", 50.0), ("preempted", 50.0), ("ok", 30.0)]
    assert j.condition == "Complete" and j.pods_preempted == 2 and j.chunks_left == {}


def test_job_completes_and_reports_counts_not_index_sets():
    cluster = SimCluster(ClusterParams(), random.Random(1), T0)
    j = job(completions=3, parallelism=3)
    cluster.jobs["j"] = j
    for end, _, index, _, run_s in start(cluster, j):
        cluster.pod_done(j, index, "ok", run_s, end)
    status = cluster.status("j")
    assert status.condition == "Complete" and status.completed_indexes == "0-2"
    assert j.cpu_s == pytest.approx(300.0)


def test_runtime_of_a_batch_scales_with_its_chunks():
    rng = random.Random(2)
    rt = Runtimes(chunk_seconds=10.0, sigma=0.5, pod_overhead_s=5.0)
    mean = sum(rt.sample(rng, "ingest-L2", 32) for _ in range(2000)) / 2000
    assert mean == pytest.approx(5 + 32 * 10, rel=0.05)
    recorded = Runtimes(recorded={"ingest-L2": [7.0]})
    assert recorded.sample(rng, "ingest-L2", 32) == 7.0
    # The rest of a recorded pod's batch: its start-up, and its work in proportion.
    part = Runtimes(pod_overhead_s=10.0, recorded={"ingest-L2": [110.0]})
    assert part.sample(rng, "ingest-L2", 5, batch=10) == pytest.approx(60.0)
    assert part.sample(rng, "ingest-L2", 10, batch=10) == 110.0
    # Each run carries its start-up, which the cluster counts as no chunk done.
    assert part.pod_run(rng, "ingest-L2", 5, batch=10) == PodRun(60.0, 10.0)
    assert Runtimes(pod_overhead_s=10.0, recorded={"k": [4.0]}).pod_run(rng, "k", 1) == PodRun(
        4.0, 4.0
    )
    assert rt.pod_run(rng, "ingest-L2", 32).startup_s == rt.pod_overhead_s


def test_recorded_runtimes_fall_back_to_the_layer_mean():
    run = RunState("r", "g", ["ingest"], {"ingest": 3})
    run.layers = {
        "ingest-L2": LayerState("ingest", 2, pods=PodUsage(succeeded=4, succeeded_runtime_s=40.0)),
        "ingest-L3": LayerState("ingest", 3),
    }
    assert recorded_runtimes(run) == {"ingest-L2": [10.0]}
    assert recorded_runtimes(run, {"ingest-L2": [1.0, 2.0]}) == {"ingest-L2": [1.0, 2.0]}


def test_whole_build_runs_layers_in_order_within_the_ramp():
    cfg = demo_cfg(64)
    run = new_run(cfg, "sim", ["ingest"], "auto", T0)
    report = simulate(cfg, run, SimSettings(runtimes=Runtimes(chunk_seconds=1.0)))
    assert report.status == "succeeded"
    layers = report.run.ordered_layers()
    assert [ls.phase for ls in layers] == ["succeeded"] * len(layers)
    for below, above in zip(layers, layers[1:], strict=False):
        assert above.timing.submitted_at >= below.timing.finished_at  # gating by the real decision
    assert max(ls.job.parallelism for ls in layers) <= cfg.job.ramp.max
    assert report.pods == sum(lr.batches for lr in report.layers)  # no failures, no extras
    assert report.cost_usd > 0 and report.function_invocations >= report.reconciles


def test_approve_mode_waits_for_the_operator():
    cfg = demo_cfg(64)
    fast = SimSettings(runtimes=Runtimes(chunk_seconds=1.0), approve_after_s=0.0)
    slow = SimSettings(runtimes=Runtimes(chunk_seconds=1.0), approve_after_s=1000.0)
    auto = simulate(cfg, new_run(cfg, "a", ["ingest"], "approve", T0), fast)
    gated = simulate(cfg, new_run(cfg, "b", ["ingest"], "approve", T0), slow)
    waits = len(gated.run.layers)  # every layer needs an approval, the first too
    # plus, per layer, at most a cold node start (the nodes idled away during the wait)
    extra = gated.wall_s - auto.wall_s - 1000.0 * waits
    assert 0 <= extra <= waits * 2 * ClusterParams().node_startup_s


def test_budget_guard_pauses_the_simulated_build():
    cfg = demo_cfg(64)
    run = new_run(cfg, "b", ["ingest"], "auto", T0, budget_usd=0.0001)
    report = simulate(cfg, run, SimSettings(runtimes=Runtimes(chunk_seconds=5.0)))
    assert report.status == "paused" and report.run.budget_alerted


def test_preemptions_add_pods_and_time_not_failures():
    cfg = demo_cfg(64)
    calm = simulate(cfg, new_run(cfg, "a", ["ingest"], "auto", T0), SimSettings())
    stormy = SimSettings(cluster=ClusterParams(preemptions_per_hour=6.0))
    rough = simulate(cfg, new_run(cfg, "b", ["ingest"], "auto", T0), stormy)
    assert rough.status == "succeeded" and rough.pods > calm.pods
    assert sum(lr.failed for lr in rough.layers) == 0
    # Preempted pods resume from their done markers: the build is not started over.
    assert rough.wall_s < 1.5 * calm.wall_s


def test_controller_cost_scales_to_a_month():
    day = controller_cost(10_000, 100_000, 10_000, 10_000, 86400.0, reconcile_s=0.5)
    assert day.monthly_usd == pytest.approx((day.build_usd - 0.1 / 30) * 30 + 0.1, rel=1e-6)
    assert day.build_usd > 0.1  # invocations, compute, reads and writes all count
