"""The canary (shared.reconcile.canary, canary_plan, canary_forecast): its Job in the worker
contract's own terms, its figures, the layer sized from them (pins kept), the reconcile that creates
it, waits for it and only then starts (or asks to approve) the layer, and the simulator's
forecast fed with its runtimes."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from shared.config.config import LayerOverride
from shared.config.config_files import load_config
from shared.forecast.canary_forecast import chunk_runtime, forecast_build, with_canary_forecasts
from shared.jobs.autopilot import Requests
from shared.jobs.layer_spec import layer_spec
from shared.model.grid import batch_coords
from shared.model.phase import Phase
from shared.model.worker_contract import BATCH_SIZE
from shared.money.pricing import RateRow
from shared.reconcile.build_plan import new_run, plan_for
from shared.reconcile.canary import (
    CANARY_LABEL,
    CanaryFigures,
    CanaryPlan,
    PodTimes,
    canary_figures,
    canary_manifest,
    canary_pods,
    canary_size,
    pod_summary,
    size_layer,
    with_canary_sizes,
)
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, Billing, CreateJob, LayerPlan, PatchJob, Plan, Snapshot
from shared.reconcile.vcpu_budget import VcpuBudget, running_vcpus
from tests.builders.decide_runs import RAMP, job, make_run, name_for
from tests.builders.demo_configs import with_batch
from tests.builders.pod_infos import T0, pod_info

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
SUMMARY = (
    '{"severity": "INFO", "message": "batch summary: 1 processed, 0 skipped of 1", '
    '"chunk_compute_s": %s, "startup_s": %s, "exit_code": 0}'
)
# The worker's line for a pod of two chunks: (chunk compute, first chunk, start-up).
SUMMARY2 = (
    '{"severity": "INFO", "message": "batch summary: 2 processed, 0 skipped of 2", '
    '"processed": 2, "chunk_compute_s": %s, "first_chunk_s": %s, "startup_s": %s, '
    '"exit_code": 0}'
)
# The same with the chunks' whole spans (claim to done marker): (..., all spans, the first's).
SUMMARY2_SPANS = SUMMARY2.replace(
    '"exit_code"', '"chunk_span_s": %s, "first_span_s": %s, "exit_code"'
)
# ... and the batch's own time and the line's time, to the millisecond: (..., elapsed, time).
SUMMARY2_TIMED = SUMMARY2_SPANS.replace('"exit_code"', '"elapsed_s": %s, "time": "%s", "exit_code"')


def _demo(canary: int | None = 8):
    cfg = with_batch(load_config(DEMO))  # the figures below are at 32 chunks a pod
    ctl = cfg.controller.model_copy(update={"canary_chunks": canary})
    return cfg.model_copy(update={"controller": ctl})


def _env(manifest: dict, name: str) -> str:
    env = manifest["spec"]["template"]["spec"]["containers"][0]["env"]
    return next(v["value"] for v in env if v["name"] == name)


def test_the_canary_job_is_the_layers_own_with_two_chunks_per_index() -> None:
    """Only the name, the label, completions and PCG_BATCH_SIZE change: pod i then builds
    window positions 2i and 2i+1 of the layer's permutation, as the images' harness computes
    it (the second chunk is the one that shows a running pod's chunk time)."""
    cfg = _demo()
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    lp = plan_for(cfg, run).layers["ingest-L2"]
    assert lp.canary is not None and lp.canary.chunks == 8
    m = lp.canary.manifest
    assert m["metadata"]["name"] == lp.canary.job_name == f"{lp.job_name}-canary"
    assert m["metadata"]["labels"][CANARY_LABEL] == "true"
    assert m["spec"]["completions"] == 4 and _env(m, BATCH_SIZE) == "2"
    assert _env(lp.manifest, BATCH_SIZE) == "32"  # the layer's own Job is untouched
    for key in ("PCG_PERM_SEED", "PCG_LAYER", "PCG_GRID_SHAPE"):
        assert _env(m, key) == _env(lp.manifest, key)
    spec = layer_spec(cfg, "ingest", 2)
    shape, seed = cfg.layer2_shape(), cfg.job.perm_seed
    canary = [tuple(c) for i in range(4) for c in batch_coords(i, shape, seed, 2)]
    first_window = [tuple(c) for c in batch_coords(0, shape, seed, spec.batch_size)]
    assert canary == first_window[:8]  # the full layer finds them done and skips them
    assert len({c[0] for c in canary}) > 2  # scattered, not one row of the grid
    # upper layers and a config without a canary get none
    assert plan_for(cfg, run).layers["ingest-L3"].canary is None
    assert plan_for(_demo(None), run).layers["ingest-L2"].canary is None


@pytest.mark.parametrize(("asked", "chunks", "expected"), [(8, 512, 8), (8, 3, 3), (1, 1, 1)])
def test_canary_size(asked: int, chunks: int, expected: int) -> None:
    assert canary_size(asked, chunks) == expected


@pytest.mark.parametrize(("chunks", "pods"), [(8, 4), (7, 4), (2, 1), (1, 1)])
def test_canary_pods_build_two_chunks_each(chunks: int, pods: int) -> None:
    assert canary_pods(chunks) == pods


def test_canary_manifest_caps_max_failed_indexes() -> None:
    cfg = _demo()
    lp = plan_for(cfg, new_run(cfg, "r1", ["ingest"], "auto", T0)).layers["ingest-L2"]
    assert canary_manifest(lp.manifest, "x", 4)["spec"]["maxFailedIndexes"] == 2


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("noise\n" + SUMMARY % (3.5, 12.0), PodTimes(12.0, 3.5)),
        ("2026 INFO " + SUMMARY % (0.25, 1.5) + "\n", PodTimes(1.5, 0.25)),
        (SUMMARY2 % (3.6, 3.5, 1.5), PodTimes(1.5, 3.6, 2, 3.5)),
        (SUMMARY2_SPANS % (3.6, 3.5, 1.5, 3.8, 3.6), PodTimes(1.5, 3.6, 2, 3.5, 3.8, 3.6)),
        (
            SUMMARY2_TIMED % (3.6, 3.5, 1.5, 3.8, 3.6, 4.0, "2026-01-01T00:00:07.250Z"),
            PodTimes(1.5, 3.6, 2, 3.5, 3.8, 3.6, 4.0, T0 + timedelta(seconds=7.25)),
        ),
        # a whole second says no more than the pod's own end: not taken
        (
            SUMMARY2_TIMED % (3.6, 3.5, 1.5, 3.8, 3.6, 4.0, "2026-01-01T00:00:07Z"),
            PodTimes(1.5, 3.6, 2, 3.5, 3.8, 3.6, 4.0),
        ),
        ("layer 2 batch 0: 1 chunks\nlayer 2 batch 0 done: 1 ok", None),  # the images' harness
        ('batch summary: {"chunk_compute_s": 1}', None),  # no start-up
        ("", None),
    ],
)
def test_pod_summary_from_the_workers_log(log: str, expected: PodTimes | None) -> None:
    assert pod_summary(log) == expected


@pytest.mark.parametrize(
    ("times", "warm"),
    [
        (PodTimes(1.5, 3.6, 2, 3.5), pytest.approx(0.1)),  # the second chunk, without the cold
        (PodTimes(1.5, 4.0, 4, 1.0), 1.0),  # the mean of the chunks after the first
        (PodTimes(1.5, 3.5, 1, 3.5), None),  # one chunk: cold and warm cannot be told apart
        (PodTimes(1.5, 3.6, 2), None),  # an older worker: no first chunk reported
        (PodTimes(1.5, 3.0, 2, 3.5), 0.0),  # clock noise never makes a negative chunk
        # the spans where reported: the second chunk's claim and done marker count too
        (PodTimes(1.5, 3.6, 2, 3.5, 3.85, 3.6), pytest.approx(0.25)),
        (PodTimes(1.5, 4.0, 4, 1.0, 5.5, 1.0), pytest.approx(1.5)),  # the mean after the first
        (PodTimes(1.5, 3.5, 1, 3.5, 3.6, 3.6), None),  # one chunk, spans or not
        (PodTimes(1.5, 3.6, 2, None, 3.8, 3.6), pytest.approx(0.2)),  # spans are enough
    ],
)
def test_a_pods_warm_chunk_time(times: PodTimes, warm: float | None) -> None:
    assert times.warm_chunk_s() == warm


def _pod(i: int, run_s: float, **kw):
    start = T0 + timedelta(seconds=2 + i)
    return pod_info(
        f"u{i}",
        "Succeeded",
        name=f"p{i}",
        index=i,
        created=T0,
        started=start,
        finished=start + timedelta(seconds=run_s),
        **kw,
    )


def test_canary_figures() -> None:
    pods = [_pod(i, 10.0 + i, peak_memory_gib=0.5 + i / 10, cpu_used=0.2) for i in range(4)]
    pods.append(pod_info("bad", "Failed", started=T0, finished=T0 + timedelta(seconds=5)))
    logs = {"p0": SUMMARY % (2.0, 8.0), "p1": SUMMARY % (4.0, 7.0)}
    f = canary_figures(pods, logs)
    assert f is not None and f.pods == 4 and f.chunks == 1 + 1 + 2 + 2  # unlogged: two a pod
    assert (f.runtime_p50_s, f.runtime_p95_s) == (11.0, 13.0)
    assert (f.start_p50_s, f.start_max_s, f.start_mean_s) == (3.0, 5.0, 3.5)
    assert f.peak_memory_gib == pytest.approx(0.8) and f.cpu_p95 == 0.2
    assert f.pod_seconds == 10 + 11 + 12 + 13 + 5  # the failed attempt is billed too
    assert (f.chunk_p50_s, f.chunk_p95_s, f.startup_p50_s) == (2.0, 4.0, 7.0)
    assert f.pod_overhead_p50_s is None  # one chunk a pod: no start-up apart from it
    assert canary_figures([pods[-1]]) is None


def test_canary_figures_separate_a_pods_start_up_from_its_chunks() -> None:
    """Pods of two chunks: the chunk time is the second chunk's, and what the pod paid
    beyond its two chunks is its start-up (the first chunk's cold part included)."""
    pods = [_pod(i, run_s) for i, run_s in enumerate((5.0, 6.0, 7.0))]
    logs = {
        "p0": SUMMARY2 % (3.6, 3.5, 1.0),  # warm 0.1: start-up 5 - 0.2
        "p1": SUMMARY2 % (3.7, 3.5, 1.0),  # warm 0.2: 6 - 0.4
        "p2": SUMMARY2 % (4.0, 3.7, 1.0),  # warm 0.3: 7 - 0.6
    }
    f = canary_figures(pods, logs)
    assert f is not None and f.pods == 3 and f.chunks == 6
    assert f.chunk_p50_s == pytest.approx(0.2) and f.chunk_p95_s == pytest.approx(0.3)
    assert f.pod_overhead_p50_s == pytest.approx(5.6)
    assert f.startup_p50_s == 1.0


def test_a_pods_start_up_by_the_workers_own_clock() -> None:
    """Where the worker reports its batch's time, a pod's start-up is its process start
    plus that time less its chunks at the warm time, to the millisecond: Kubernetes' whole
    seconds (2 s here) would make it 1.8 s, not 0.85."""
    pods = [_pod(0, 2.0)]
    logs = {"p0": SUMMARY2_TIMED % (0.5, 0.45, 0.6, 0.7, 0.6, 0.45, "2026-01-01T00:00:03.5Z")}
    f = canary_figures(pods, logs)
    assert f is not None and f.chunk_p50_s == pytest.approx(0.1)
    assert f.pod_overhead_p50_s == pytest.approx(0.6 + 0.45 - 2 * 0.1)


@pytest.mark.parametrize(
    ("line_time", "ends"),
    [
        ("2026-01-01T00:00:04.700Z", [4.7]),  # the summary's time: after the cut second
        ("2026-01-01T00:00:04Z", [4.0]),  # a whole second: the pod's own end
        (None, [4.0]),  # no summary line
    ],
)
def test_a_pods_end_to_the_millisecond(line_time: str | None, ends: list[float]) -> None:
    from shared.reconcile.canary import pods_ended

    pod = _pod(0, 2.0)  # started at 2 s, finished at 4 s (cut to the second)
    logs = {} if line_time is None else {"p0": SUMMARY2_TIMED % (1, 1, 1, 1, 1, 1, line_time)}
    got = pods_ended([pod, pod_info("u9", "Running", name="p9", started=T0)], logs)
    assert [(t - T0).total_seconds() for t in got] == ends


FIG = CanaryFigures(8, 10.0, 12.0, 1.0, 2.0, peak_memory_gib=1.7, cpu_p95=0.6, pod_seconds=80)


@pytest.mark.parametrize(
    ("figures", "pin", "margin", "expected"),
    [
        (FIG, None, 1.25, (0.75, 2.25)),  # 0.6x1.25=0.75; 1.7x1.25=2.125 -> 2.25
        (FIG, None, 1.0, (0.75, 1.75)),
        (FIG, LayerOverride(memory=4.0), 1.25, (0.75, 4.0)),  # memory pinned
        (FIG, LayerOverride(cpu=2.0), 1.25, (2.0, 2.25)),  # CPU pinned
        (replace(FIG, peak_memory_gib=None, cpu_p95=None), None, 1.25, (0.25, 0.5)),  # GKE
        (replace(FIG, peak_memory_gib=0.05, cpu_p95=0.01), None, 1.25, (0.25, 0.5)),  # minimum
    ],
)
def test_size_layer_from_the_canary(
    figures: CanaryFigures,
    pin: LayerOverride | None,
    margin: float,
    expected: tuple[float, float],
) -> None:
    job = _demo().job
    if pin is not None:
        res = job.resources.model_copy(update={"overrides": {2: pin}})
        job = job.model_copy(update={"resources": res})
    got = size_layer(figures, job, 2, margin)
    assert (got.cpu, got.memory_gib) == expected


def _plan(run, lp_canary: CanaryPlan | None) -> Plan:
    layers = {
        k: LayerPlan(10, RAMP, 0.25, 0.5, job_name=name_for(ls)) for k, ls in run.layers.items()
    }
    layers["ingest-L2"] = replace(layers["ingest-L2"], canary=lp_canary)
    return Plan(layers)


def _canary_plan() -> CanaryPlan:
    # 8 chunks: 4 pods of two
    return CanaryPlan("job-ingest-2-0-canary", 8, 1.25, _demo().job)


def _stub_forecast(cfg, run, stage, layer, figures, planned, sized, now) -> dict:
    return {"wall_s": 99.0}


def _decided(seen: Snapshot, plan: Plan, now: datetime):
    """The decision as the reconcile finishes it: the ended canary's forecast added (the
    simulator stubbed)."""
    return with_canary_forecasts(_demo(), seen, decide(seen, plan, None, now), _stub_forecast)


@pytest.mark.parametrize("advance", ["auto", "approve"])
def test_reconcile_runs_the_canary_first_then_the_layer(advance: str) -> None:
    run = make_run(advance)
    plan = _plan(run, _canary_plan())
    d = decide(Snapshot(run), plan, None, T0)
    ls = d.state.layers["ingest-L2"]
    assert d.actions == [CreateJob("ingest", 2, "job-ingest-2-0-canary", 4)]
    assert ls.phase == "waiting" and ls.canary.phase == Phase.RUNNING
    # running: the layer waits, no approval asked yet
    later = T0 + timedelta(seconds=30)
    running = {ls.canary.job: job(ls.canary.job, completions=4)}
    d2 = decide(Snapshot(d.state, running), plan, None, later)
    assert d2.actions == [] and d2.state.layers["ingest-L2"].phase == "waiting"
    assert not d.again and not d2.again  # a canary created or running: nothing to do now
    # done: figures kept, layer sized (0.75 vCPU / 1.25 GiB): held one reconcile for the size
    done = {ls.canary.job: job(ls.canary.job, completions=4, condition="Complete")}
    pods = {ls.canary.job: [_pod(i, 10.0, peak_memory_gib=0.9, cpu_used=0.5) for i in range(4)]}
    d3 = _decided(Snapshot(d2.state, done, pods), plan, later)
    ls3 = d3.state.layers["ingest-L2"]
    assert ls3.canary.phase == Phase.SUCCEEDED and ls3.phase == "waiting" and d3.actions == []
    # ... which the reconciler runs at once, not at the next trigger (a tick later)
    assert d3.again
    assert ls3.canary.record["sized"] == {"cpu": 0.75, "memory_gib": 1.25}
    assert ls3.canary.record["forecast"] == {"wall_s": 99.0} and ls3.canary.record["pods"] == 4
    assert ls3.canary.record["chunks"] == 8
    assert ls3.canary.record["completion_s"] == 15.0  # its last pod ended at 15 s, seen at 30 s
    assert ls3.pods.cpu_seconds == pytest.approx(4 * 10 * 1.0)  # its pods billed to the layer
    # next reconcile: the config carries the sized requests; the layer goes on
    d4 = decide(Snapshot(d3.state), _plan(d3.state, None), None, later)
    assert not d4.again
    if advance == "auto":
        assert [type(a) for a in d4.actions] == [CreateJob]
        assert d4.state.layers["ingest-L2"].phase == "running"
    else:
        (alert,) = d4.actions
        assert isinstance(alert, Alert) and alert.kind == "approval_needed"
        assert alert.details["canary"]["forecast"] == {"wall_s": 99.0}


def test_a_canary_of_the_planned_size_does_not_hold_the_layer() -> None:
    run = make_run("auto")
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.job = Phase.RUNNING, "job-ingest-2-0-canary"
    done = {ls.canary.job: job(ls.canary.job, completions=4, condition="Complete")}
    pods = {ls.canary.job: [_pod(i, 10.0, peak_memory_gib=0.3, cpu_used=0.1) for i in range(4)]}
    d = decide(Snapshot(run, done, pods), _plan(run, _canary_plan()), None, T0)
    assert d.state.layers["ingest-L2"].phase == "running"  # 0.25/0.5 as planned: no wait
    assert not d.again


def test_an_approval_asked_as_the_canary_ends_carries_its_forecast() -> None:
    """A canary of the planned size lets the layer go on in the reconcile that ends it: under
    `approve` that reconcile's approval_needed alert carries the canary's record with the
    forecast, as the record the layer keeps does."""
    run = make_run("approve")
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.job = Phase.RUNNING, "job-ingest-2-0-canary"
    done = {ls.canary.job: job(ls.canary.job, completions=4, condition="Complete")}
    pods = {ls.canary.job: [_pod(i, 10.0, peak_memory_gib=0.3, cpu_used=0.1) for i in range(4)]}
    d = _decided(Snapshot(run, done, pods), _plan(run, _canary_plan()), T0)
    (alert,) = d.actions
    assert isinstance(alert, Alert) and alert.kind == "approval_needed"
    record = d.state.layers["ingest-L2"].canary.record
    assert record["forecast"] == {"wall_s": 99.0} and alert.details["canary"] == record


def test_a_forecast_that_cannot_price_the_run_is_recorded_as_its_error() -> None:
    run = make_run("auto")
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.job = Phase.RUNNING, "job-ingest-2-0-canary"
    done = {ls.canary.job: job(ls.canary.job, completions=4, condition="Complete")}
    pods = {ls.canary.job: [_pod(i, 10.0, peak_memory_gib=0.3, cpu_used=0.1) for i in range(4)]}
    seen = Snapshot(run, done, pods)

    def unpriced(*args) -> dict:
        raise ValueError("no rate for region mars-north1\nsee the rate table")

    d = with_canary_forecasts(
        _demo(), seen, decide(seen, _plan(run, _canary_plan()), None, T0), unpriced
    )
    record = d.state.layers["ingest-L2"].canary.record
    assert "forecast" not in record and record["forecast_error"] == "no rate for region mars-north1"


def test_a_failed_canary_alerts_and_the_layer_goes_on_as_configured() -> None:
    run = make_run("auto")
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.job = Phase.RUNNING, "job-ingest-2-0-canary"
    failed = {ls.canary.job: job(ls.canary.job, condition="Failed", reason="FailedIndexes")}
    d = decide(Snapshot(run, failed, {ls.canary.job: []}), _plan(run, _canary_plan()), None, T0)
    kinds = [a.kind for a in d.actions if isinstance(a, Alert)]
    assert kinds == ["canary_failed"]
    assert d.state.layers["ingest-L2"].canary.phase == Phase.FAILED
    assert d.state.layers["ingest-L2"].phase == "running"


def test_with_canary_sizes_overrides_only_the_measured_layer() -> None:
    cfg = _demo()
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.record = (
        Phase.SUCCEEDED,
        {"sized": {"cpu": 0.75, "memory_gib": 1.25}},
    )
    sized = with_canary_sizes(cfg, run)
    assert layer_spec(sized, "ingest", 2).requests == Requests(0.75, 1.25)
    assert layer_spec(sized, "ingest", 3).requests == layer_spec(cfg, "ingest", 3).requests


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        # the worker's chunk times: chunk 2 s, the rest of the 10 s pod is start-up
        (replace(FIG, chunk_p50_s=2.0, chunk_p95_s=2.0), (2.0, 0.05, 8.0)),
        # no chunk times: the simulator's 10 s start-up, at most half the pod
        (FIG, (5.0, pytest.approx(0.1108, abs=1e-3), 5.0)),
        (replace(FIG, runtime_p50_s=40.0, runtime_p95_s=40.0), (30.0, 0.05, 10.0)),
        # pods of two chunks with the second timed: the warm chunk, the measured start-up
        (
            replace(FIG, chunks=8, pods=4, chunk_p50_s=0.1, chunk_p95_s=0.2, pod_overhead_p50_s=4),
            (0.1, pytest.approx(math.log(2) / 1.645), 4.0),
        ),
        # two chunks a pod, no start-up measured: the pod less both chunks
        (replace(FIG, chunks=8, pods=4, chunk_p50_s=2.0, chunk_p95_s=2.0), (2.0, 0.05, 6.0)),
        # two chunks a pod, no log: the pod less the start-up, over its two chunks
        (replace(FIG, chunks=8, pods=4), (2.5, pytest.approx(0.1108, abs=1e-3), 5.0)),
    ],
)
def test_chunk_runtime(figures: CanaryFigures, expected: tuple) -> None:
    assert chunk_runtime(figures) == expected


def test_forecast_build_by_the_simulator_grows_with_the_canarys_chunk_time() -> None:
    cfg = _demo()
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    quick = replace(FIG, chunk_p50_s=0.1, chunk_p95_s=0.2)
    slow = replace(FIG, runtime_p50_s=40.0, chunk_p50_s=2.0, chunk_p95_s=3.0)
    args = (Requests(0.25, 0.5), Requests(0.75, 2.25), T0 + timedelta(seconds=20))
    a = forecast_build(cfg, run, "ingest", 2, quick, *args)
    b = forecast_build(cfg, run, "ingest", 2, slow, *args)
    assert a["wall_s"] == pytest.approx(20.0 + a["remaining_s"])
    assert b["remaining_s"] > 2 * a["remaining_s"] and b["cost_usd"] > a["cost_usd"]
    specs = [layer_spec(cfg, "ingest", layer) for layer in range(2, 6)]
    assert a["pods"] == sum(s.completions for s in specs) + quick.chunks


@pytest.mark.parametrize(("completion_s", "shorter"), [(0.5, True), (2.5, False), (6.0, None)])
def test_forecast_build_takes_the_canarys_own_job_completion(
    completion_s: float, shorter: bool | None
) -> None:
    """The simulated trigger after each layer's Job is done is the canary's measured
    completion, not half a tick (the demo's 5 s ticks: 2.5 s), four layers over."""
    cfg = _demo()
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    quick = replace(FIG, chunk_p50_s=0.1, chunk_p95_s=0.2)
    args = (Requests(0.25, 0.5), Requests(0.75, 2.25), T0)
    default = forecast_build(cfg, run, "ingest", 2, quick, *args)["remaining_s"]
    timed = replace(quick, completion_s=completion_s)
    got = forecast_build(cfg, run, "ingest", 2, timed, *args)["remaining_s"]
    if shorter is None:
        assert got > default
    elif shorter:
        assert got < default
    else:
        assert got == pytest.approx(default)


def test_status_shows_the_canary_and_the_right_size_lines() -> None:
    from scripts.views.status import canary_lines, rightsize_lines
    from shared.reconcile.canary import canary_summary

    run = make_run("auto")
    ls = run.layers["ingest-L2"]
    ls.canary.phase = Phase.SUCCEEDED
    ls.canary.record = {
        "chunks": 8,
        "runtime_p50_s": 13.3,
        "runtime_p95_s": 13.8,
        "peak_memory_gib": 0.125,
        "sized": {"cpu": 0.5, "memory_gib": 1.0},
        "forecast": {"wall_s": 540.0, "pods": 30, "cost_usd": 0.016},
    }
    (c,) = canary_summary(run)
    assert c["peak_memory_mib"] == 128.0 and c["forecast_wall_s"] == 540.0
    (line,) = canary_lines([c])
    assert "8 chunks" in line and "128 MiB" in line and "sized 0.5 vCPU / 1 GiB" in line
    assert "30 pods" in line
    s = {
        "stage": "ingest",
        "layer": 3,
        "basis": "L2",
        "requested": {"cpu": 1.0, "memory_gib": 4.0},
        "suggested": {"cpu": 0.5, "memory_gib": 1.0},
        "used": {"cpu_p95": 0.3, "peak_memory_gib": 1.4},
        "savings_usd": 0.01,
        "covered": False,
    }
    (line,) = rightsize_lines([s])
    assert "0.5 vCPU / 1 GiB instead of 1 / 4" in line and "peak 1.40 GiB" in line
    assert "OOM" in line


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"chunk_p50_s": 3.5, "runtime_p50_s": 13.0}, 3.5),  # the worker's own chunk time
        ({"runtime_p50_s": 30.0}, 20.0),  # the pod less the 10 s start-up
        ({"runtime_p50_s": 4.0}, 2.0),  # at most half the pod
        ({"runtime_p50_s": 30.0, "chunks": 8, "pods": 4}, 10.0),  # over two chunks a pod
    ],
)
def test_the_in_run_forecast_assumes_the_canarys_chunk_time(record: dict, expected: float) -> None:
    """Before any pod has finished, `status`'s forecast takes the canary's chunk time, not a
    30 s guess."""
    from shared.forecast.forecast import DEFAULT_CHUNK_S, run_forecast

    cfg = _demo()
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    assert run_forecast(cfg, run, T0).assumed_chunk_s == DEFAULT_CHUNK_S
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.record = Phase.SUCCEEDED, record
    assert run_forecast(cfg, run, T0).assumed_chunk_s == expected


def test_the_in_run_forecast_takes_the_canarys_start_up_and_wait() -> None:
    """A pod's start-up, its wait for a place and a Job's completion come from the canary's
    measurements, not the 10 s constant: pods of 4 s start-up + 32 x 0.1 s, each after a 2 s
    wait, each layer seen done 1.5 s after its last pod by the reconcile that starts the next
    (no half tick's advance on top of that); an older record falls back on the defaults."""
    from shared.forecast.forecast import POD_OVERHEAD_S, forecast, forecast_inputs, run_forecast

    cfg = _demo()
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    ls = run.layers["ingest-L2"]
    ls.canary.phase = Phase.SUCCEEDED
    ls.canary.record = {
        "chunk_p50_s": 0.1,
        "pod_overhead_p50_s": 4.0,
        "start_p50_s": 1.0,  # whole seconds: the mean below is taken
        "start_mean_s": 2.0,
        "completion_s": 1.5,
    }
    inputs, advance = forecast_inputs(cfg, run), cfg.controller.tick_period_s / 2
    got = run_forecast(cfg, run, T0).remaining_s
    want = forecast(run, *inputs, T0, 0.1, 0.0, 4.0, 2.0, 1.5).remaining_s
    assert got == pytest.approx(want)
    assert got != pytest.approx(forecast(run, *inputs, T0, 0.1, advance, 4.0, 2.0, 1.5).remaining_s)
    assert got != pytest.approx(forecast(run, *inputs, T0, 0.1, advance, 4.0, 2.0).remaining_s)
    assert got != pytest.approx(
        forecast(run, *inputs, T0, 0.1, advance, POD_OVERHEAD_S).remaining_s
    )
    assert got != pytest.approx(forecast(run, *inputs, T0, 0.1, advance, 4.0).remaining_s)
    for key in ("pod_overhead_p50_s", "start_p50_s", "start_mean_s", "completion_s"):  # older
        del ls.canary.record[key]
    assert run_forecast(cfg, run, T0).remaining_s == pytest.approx(
        forecast(run, *inputs, T0, 0.1, advance, POD_OVERHEAD_S).remaining_s
    )


def test_a_canary_past_the_class_ceiling_keeps_the_plan_and_says_why() -> None:
    run = make_run("auto")
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.job = Phase.RUNNING, "job-ingest-2-0-canary"
    done = {ls.canary.job: job(ls.canary.job, completions=4, condition="Complete")}
    pods = {ls.canary.job: [_pod(i, 10.0, peak_memory_gib=200.0, cpu_used=0.5) for i in range(4)]}
    d = decide(Snapshot(run, done, pods), _plan(run, _canary_plan()), None, T0)
    ls2 = d.state.layers["ingest-L2"]
    assert "ceiling" in ls2.canary.record["size_error"]
    assert ls2.canary.record["sized"] == ls2.canary.record["planned"] and ls2.phase == "running"


# -- run controls: pause/resume and controller.max_vcpus cover the canary --------------------


def _canary_running(status: str, **job_kw):
    run = make_run("auto")
    run.status = status
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.job = Phase.RUNNING, "job-ingest-2-0-canary"
    ls.canary.record = {"chunks": 4, "parallelism": 4, "cpu": 0.25}
    jobs = {ls.canary.job: job(ls.canary.job, completions=4, parallelism=4, **job_kw)}
    return run, jobs


@pytest.mark.parametrize(
    ("status", "job_kw", "expected"),
    [
        ("paused", {}, [PatchJob("job-ingest-2-0-canary", suspend=True)]),  # pipeline pause
        ("paused", {"suspended": True}, []),  # already suspended
        ("running", {"suspended": True}, [PatchJob("job-ingest-2-0-canary", suspend=False)]),
        ("running", {}, []),  # running as it should: the layer waits for it
        ("paused", {"condition": "Complete"}, []),  # ended: nothing to suspend
    ],
)
def test_pause_and_resume_suspend_a_running_canary(status, job_kw, expected) -> None:
    run, jobs = _canary_running(status, **job_kw)
    d = decide(
        Snapshot(run, jobs, {"job-ingest-2-0-canary": []}), _plan(run, _canary_plan()), None, T0
    )
    assert [a for a in d.actions if isinstance(a, PatchJob)] == expected
    assert d.state.layers["ingest-L2"].phase == "waiting"


# $1 per vCPU-second on Spot, nothing else.
DOLLAR_PER_CPU_S = (RateRow("test", "general-purpose", 0.0, 3600.0, 0.0, 0.0, 0.0),)


def test_the_budget_guard_suspends_a_running_canary() -> None:
    run, jobs = _canary_running("running")
    run.budget_usd = 1.0
    # an earlier canary's pods, billed to its layer before it started: $2, over the budget
    run.layers["ingest-L2"].pods.cpu_seconds = 2.0
    plan = replace(_plan(run, _canary_plan()), billing=Billing("test"))
    d = decide(Snapshot(run, jobs, {"job-ingest-2-0-canary": []}), plan, DOLLAR_PER_CPU_S, T0)
    assert d.state.status == "paused"
    assert PatchJob("job-ingest-2-0-canary", suspend=True) in d.actions


@pytest.mark.parametrize(
    ("max_vcpus", "others", "expected"),
    [
        (None, 0.0, CreateJob("ingest", 2, "job-ingest-2-0-canary", 4)),  # no cap: all chunks
        (10.0, 0.0, CreateJob("ingest", 2, "job-ingest-2-0-canary", 4)),  # room for 4 x 0.25
        (10.0, 9.5, CreateJob("ingest", 2, "job-ingest-2-0-canary", 2)),  # room for 2
        (10.0, 9.9, None),  # not one pod fits: held by the cap
    ],
)
def test_a_canary_starts_within_max_vcpus(max_vcpus, others, expected) -> None:
    run = make_run("auto")
    plan = replace(_plan(run, _canary_plan()), max_vcpus=max_vcpus)
    d = decide(Snapshot(run, others_vcpus=others), plan, None, T0)
    ls = d.state.layers["ingest-L2"]
    assert d.actions == ([expected] if expected else [])
    assert ls.timing.held_by_vcpu_cap == (expected is None)
    assert ls.canary.phase == (Phase.RUNNING if expected else Phase.WAITING)


def test_a_running_canary_counts_against_max_vcpus() -> None:
    run, _ = _canary_running("running")  # 4 pods x 0.25 vCPU
    assert running_vcpus([run]) == 1.0
    budget = VcpuBudget.of(10.0, run, others=2.0)
    assert budget is not None and budget.free == 7.0
    run.layers["ingest-L2"].canary.phase = Phase.SUCCEEDED
    assert running_vcpus([run]) == 0.0
