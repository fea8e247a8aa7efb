"""Right-sizing (shared.reconcile.rightsize): usage kept per layer, the memory-growth fit, the
suggested requests from the layers below (or the layer's own pods), the savings, the margin raised
after an OOM kill on a right-sized layer, and the config keys."""

from __future__ import annotations

import math
import os
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.local.kubelet.proc_usage import (
    LifeUsage,
    parse_stat_total_ticks,
    parse_status_hwm_bytes,
)
from shared.config.config import ConfigError, LayerOverride
from shared.config.config_files import load_config
from shared.control.commit_record import commit_record
from shared.jobs.autopilot import Requests
from shared.model.state import LayerState, PodUsage
from shared.money.pricing import load_rates, pod_cost, rate_for
from shared.ports.pod_usage import PodLifeUsage, with_usage
from shared.reconcile.decide import decide
from shared.reconcile.decision import CreateJob, Plan, Snapshot
from shared.reconcile.pod_accounting import record_pods
from shared.reconcile.rightsize import (
    SAMPLES_KEPT,
    PodFigures,
    layer_usage,
    memory_growth,
    note_usage,
    percentile,
    rightsized_layers,
    size_from,
    suggest,
)
from tests.builders.decide_runs import job, make_run, name_for, plans
from tests.builders.pod_infos import T0, pod_info

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
RATE = rate_for(load_rates(), "us-central1", "", True)


def _layer(
    layer: int, cpu: list[float], mem: list[float], cpu_s: float = 0.0, runtime_s: float = 0.0
) -> LayerState:
    ls = LayerState(
        stage="ingest", layer=layer, pods=PodUsage(cpu_request=1.0, memory_request_gib=4.0)
    )
    ls.pods.cpu_seconds, ls.pods.succeeded_runtime_s = cpu_s, runtime_s
    note_usage(ls, [PodFigures(c, m) for c, m in zip(cpu, mem, strict=True)])
    return ls


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0], 95, 1.0),
        ([3.0, 1.0, 2.0], 50, 2.0),
        ([float(i) for i in range(1, 101)], 95, 95.0),
        ([float(i) for i in range(1, 21)], 95, 19.0),
        ([0.1, 0.9], 95, 0.9),
    ],
)
def test_percentile_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([], 1.0),
        ([(2, 1.0)], 1.0),  # one layer: no growth can be seen
        ([(2, 1.0), (3, 2.0)], 2.0),
        ([(2, 1.0), (3, 2.0), (4, 4.0)], 2.0),
        ([(2, 1.0), (3, 4.0), (4, 4.0)], 2.0),  # fitted through all, not the last step
        ([(2, 4.0), (3, 2.0)], 1.0),  # never shrinks
        ([(2, 0.01), (3, 10.0)], 16.0),  # clamped
    ],
)
def test_memory_growth_fit(points: list[tuple[int, float]], expected: float) -> None:
    assert memory_growth(points) == pytest.approx(expected)


def test_note_usage_keeps_the_latest_samples() -> None:
    ls = LayerState(stage="ingest", layer=2)
    note_usage(ls, [PodFigures(i, i) for i in range(SAMPLES_KEPT + 5)])
    assert len(ls.pods.used_cpu) == len(ls.pods.used_memory_gib) == SAMPLES_KEPT
    assert ls.pods.used_cpu[0] == 5 and ls.pods.used_memory_gib[-1] == SAMPLES_KEPT + 4


def test_record_pods_keeps_succeeded_pods_figures_only() -> None:
    """The pod accounting hands right-sizing the measured succeeded pods, not failed ones and
    not pods the cluster did not measure (GKE)."""
    ls = LayerState(stage="ingest", layer=2, pods=PodUsage(cpu_request=1.0, memory_request_gib=2.0))
    t = T0 + timedelta(seconds=10)
    pods = [
        pod_info("a", "Succeeded", started=T0, finished=t, peak_memory_gib=1.5, cpu_used=0.4),
        pod_info("b", "Failed", started=T0, finished=t, peak_memory_gib=1.9, cpu_used=0.9),
        pod_info("c", "Succeeded", started=T0, finished=t),
    ]
    record_pods(ls, pods, t + timedelta(seconds=1))
    assert ls.pods.used_cpu == [0.4] and ls.pods.used_memory_gib == [1.5]
    usage = layer_usage(ls)
    assert usage is not None and usage.peak_memory_gib == 1.5 and usage.cpu_p95 == 0.4


# (usage of layers 2.. as (cpu samples, memory samples), layer to size, margin) ->
# (cpu, memory GiB) snapped
SIZING = [
    # one layer below: its p95 CPU and peak memory x margin, snapped up to the grid
    ([([0.3, 0.5, 0.4], [1.0, 1.2, 1.1])], 3, 1.0, (0.5, 1.25)),
    # margin 1.25 on 2 GiB: 2.5 GiB; CPU 0.9 x 1.25 = 1.125 -> 1.25
    ([([0.9], [2.0])], 3, 1.25, (1.25, 2.5)),
    # two layers doubling: layer 4 gets the nearest's peak x 2
    ([([0.5], [1.0]), ([0.5], [2.0])], 4, 1.0, (0.75, 4.0)),  # 4 GiB needs 4/6.5 vCPU
    # two layers above the nearest: grown twice
    ([([0.5], [1.0]), ([0.5], [2.0])], 5, 1.0, (1.25, 8.0)),  # 8 GiB needs 8/6.5 vCPU
    # tiny usage: Autopilot's minimum
    ([([0.01], [0.05])], 3, 1.25, (0.25, 0.5)),
]


@pytest.mark.parametrize(("layers", "target", "margin", "expected"), SIZING)
def test_size_from_layers_below(
    layers: list[tuple[list[float], list[float]]],
    target: int,
    margin: float,
    expected: tuple[float, float],
) -> None:
    usages = [layer_usage(_layer(2 + i, c, m)) for i, (c, m) in enumerate(layers)]
    got = size_from([u for u in usages if u], target, margin)
    assert (got.cpu, got.memory_gib) == expected


def test_suggest_compares_with_what_the_layer_used_and_prices_the_savings() -> None:
    l2 = _layer(2, [0.2, 0.3], [0.6, 0.8], cpu_s=100.0, runtime_s=100.0)
    l3 = _layer(3, [0.3], [1.4], cpu_s=50.0, runtime_s=50.0)
    l4 = LayerState(stage="ingest", layer=4)  # not run: sized from the fit, no savings yet
    l5 = LayerState(stage="ingest", layer=5)
    requested = {"ingest-L4": Requests(1.0, 4.0), "ingest-L5": Requests(1.0, 4.0)}
    got = {
        s.layer: s for s in suggest([l2, l3, l4, l5], requested, {"ingest": 1.25}, {"ingest": RATE})
    }
    assert got[2].basis == "own" and (got[2].suggested_cpu, got[2].suggested_memory_gib) == (
        0.5,
        1.0,
    )
    assert got[2].covered is True and got[2].used_peak_memory_gib == 0.8
    # L3 from L2 alone (no growth seen): 0.8 x 1.25 = 1.0 GiB, short of L3's 1.4 GiB peak
    assert got[3].basis == "L2" and got[3].suggested_memory_gib == 1.0 and got[3].covered is False
    expected = pod_cost(RATE, 1.0, 4.0, 50.0) - pod_cost(RATE, 0.5, 1.0, 50.0)
    assert got[3].savings_usd == pytest.approx(expected)
    # L4 from L2-L3: growth 1.75 per layer, 1.4 x 1.75 x 1.25 = 3.0625 -> 3.25 GiB
    assert got[4].basis == "L2-L3" and got[4].suggested_memory_gib == 3.25
    assert got[4].requested_memory_gib == 4.0 and got[4].savings_usd is None
    assert got[5].suggested_memory_gib == math.ceil(1.4 * 1.75**2 * 1.25 * 4) / 4


def test_suggest_skips_layers_without_figures() -> None:
    assert suggest([LayerState(stage="ingest", layer=2)], {}, {"ingest": 1.25}, {}) == []


def test_auto_sizes_each_layer_from_the_layers_below_and_an_oom_widens_the_margin() -> None:
    l2 = _layer(2, [0.4], [1.0])
    l3 = _layer(3, [0.4], [2.0])
    l4 = LayerState(stage="ingest", layer=4)
    got = rightsized_layers([l2, l3, l4], 1.0)
    assert 2 not in got  # nothing below layer 2 (its canary sizes it)
    assert got[3] == Requests(0.5, 1.0)  # from L2 alone
    assert got[4] == Requests(0.75, 4.0)  # L3's 2 GiB grown x2 (fitted over L2-L3)
    l3.faults.oom_killed = 1  # the right-sized L3 was OOM-killed: L4 gets a wider margin
    got = rightsized_layers([l2, l3, l4], 1.0)
    assert got[3] == Requests(0.5, 1.0)
    assert got[4] == Requests(1.0, 5.0)  # 2 x 2 x 1.25 = 5 GiB
    l4.done_before = True  # built by an earlier run: not ours to size
    assert 4 not in rightsized_layers([l2, l3, l4], 1.0)
    assert rightsized_layers([LayerState(stage="ingest", layer=3)], 1.0) == {}


def test_suggest_shows_the_applied_requests() -> None:
    l2 = _layer(2, [0.4], [1.0])
    l3 = LayerState(stage="ingest", layer=3)
    applied = {"ingest-L3": Requests(2.0, 8.0)}
    (s2, s3) = suggest([l2, l3], {}, {"ingest": 1.0}, {"ingest": RATE}, applied=applied)
    assert (
        not s2.applied and s3.applied and (s3.suggested_cpu, s3.suggested_memory_gib) == (2.0, 8.0)
    )


def _write(tmp_path: Path, job: str, controller: str = "") -> Path:
    text = DEMO.read_text()
    (tmp_path / "dataset.yml").write_text((DEMO.parent / "dataset.yml").read_text())
    text = text.replace("\njob:\n", f"\njob:\n{job}", 1)
    if controller:
        text = text.replace("\ncontroller:\n", f"\ncontroller:\n{controller}", 1)
    path = tmp_path / "pipeline.yml"
    path.write_text(text)
    return path


def test_config_keys_default_and_reject_typos(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, "  rightsize: auto\n  canary_margin: 1.5\n"))
    assert cfg.job.rightsize == "auto" and cfg.job.canary_margin == 1.5
    assert cfg.job.rightsize_margin == 1.25
    with pytest.raises(ConfigError, match="rightsize"):
        load_config(_write(tmp_path, "  rightsize: always\n"))
    with pytest.raises(ConfigError, match="rightsize_margn"):
        load_config(_write(tmp_path, "  rightsize_margn: 1.5\n"))
    with pytest.raises(ConfigError, match="canary_margin"):
        load_config(_write(tmp_path, "  canary_margin: 0.5\n"))
    cfg = load_config(_write(tmp_path, "", controller="  canary_chunks: 8\n"))
    assert cfg.controller.canary_chunks == 8
    assert load_config(DEMO).controller.canary_chunks is None  # off by default
    with pytest.raises(ConfigError, match="canary_chunks"):
        load_config(_write(tmp_path, "", controller="  canary_chunks: 0\n"))
    with pytest.raises(ConfigError, match="canary_chunk"):
        load_config(_write(tmp_path, "", controller="  canary_chunk: 8\n"))


STAT = "1234 (py (x) y) S 1 1234 1234 0 -1 4194560 500 0 0 0 70 30 5 7 20 0 1 0 100 1000 200"


def test_proc_parsing_for_a_pods_life() -> None:
    """utime+stime+cutime+cstime counted past a command name with spaces and parentheses;
    VmHWM read in its unit."""
    assert parse_stat_total_ticks(STAT) == 70 + 30 + 5 + 7
    assert parse_status_hwm_bytes("Name: x\nVmHWM:\t  2048 kB\nVmRSS: 1 kB\n") == 2048 * 1024
    assert parse_status_hwm_bytes("Name: x\n") is None
    with pytest.raises(ValueError):
        parse_stat_total_ticks("garbage")


def test_life_usage_reads_this_process() -> None:
    """On this machine's /proc: the test process's own peak memory and CPU are seen."""
    usage = LifeUsage(every_s=0.0)
    sum(i * i for i in range(300_000))  # some CPU
    usage.sample(os.getpid())
    assert usage.peak_memory_gib() is not None and usage.peak_memory_gib() > 0.01
    assert usage.ticks > 0 and usage.cpu_used(1.0) == pytest.approx(usage.ticks / usage._hz)


def test_with_run_sizes_applies_auto_and_keeps_pins(tmp_path: Path) -> None:
    """What the controller plans with: L3 right-sized from L2's pods under `auto`, a pinned
    memory kept, nothing under `suggest`."""
    from shared.forecast.rightsize_run import run_suggestions
    from shared.jobs.layer_spec import layer_spec
    from shared.reconcile.build_plan import new_run
    from shared.reconcile.run_sizes import with_run_sizes

    cfg = load_config(_write(tmp_path, "  rightsize: auto\n  rightsize_margin: 1.0\n"))
    res = cfg.job.resources.model_copy(update={"overrides": {4: LayerOverride(memory=3.0)}})
    cfg = cfg.model_copy(update={"job": cfg.job.model_copy(update={"resources": res})})
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    note_usage(run.layers["ingest-L2"], [PodFigures(0.4, 1.6)])
    sized = with_run_sizes(cfg, run)
    assert layer_spec(sized, "ingest", 2).requests == layer_spec(cfg, "ingest", 2).requests
    assert layer_spec(sized, "ingest", 3).requests == Requests(0.5, 1.75)
    assert layer_spec(sized, "ingest", 4).requests.memory_gib == 3.0  # pinned
    assert [s.applied for s in run_suggestions(cfg, run)] == [False, True, True, True]
    suggest_only = cfg.model_copy(
        update={"job": cfg.job.model_copy(update={"rightsize": "suggest"})}
    )
    assert with_run_sizes(suggest_only, run) == suggest_only


# -- usage read from monitoring once a layer's Job finished (GKE; shared.ports.pod_usage) ----------


@pytest.mark.parametrize("read_from_monitoring", [True, False])
def test_a_finished_layer_keeps_the_usage_read_for_pods_recorded_before(
    read_from_monitoring: bool,
) -> None:
    run = make_run("auto")
    ls = run.layers["ingest-L2"]
    name = name_for(ls)
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", name, 2, 2
    ls.pods.cpu_request, ls.pods.memory_request_gib = 1.0, 2.0
    end = T0 + timedelta(seconds=90)
    pods = [
        pod_info(f"u{i}", "Succeeded", name=f"{name}-{i}-x", job_name=name, index=i, finished=end)
        for i in range(2)
    ]
    plan = plans(run, completions=2)
    # the pods finished while the Job ran: recorded without figures (the cluster has none)
    first = decide(Snapshot(run, {name: job(name, completions=2)}, {name: pods}), plan, None, end)
    assert first.state.layers["ingest-L2"].pods.used_cpu == []
    # the Job completes: its pods' lifetime usage is read once and the layer keeps it
    usage = {f"{name}-0-x": PodLifeUsage(1.5, 0.75), f"{name}-1-x": PodLifeUsage(0.5, 0.25)}
    complete = {name: job(name, completions=2, succeeded=2, condition="Complete")}
    seen = Snapshot(
        first.state,
        complete,
        {name: with_usage(pods, usage)},
        usage_read=frozenset({name} if read_from_monitoring else ()),
    )
    done = decide(seen, plan, None, end + timedelta(seconds=5)).state.layers["ingest-L2"]
    assert done.phase == "succeeded"
    if read_from_monitoring:
        assert (done.pods.used_cpu, done.pods.used_memory_gib) == ([0.75, 0.25], [1.5, 0.5])
    else:  # the cluster's own figures are noted as pods finish, never twice
        assert done.pods.used_cpu == []


@pytest.mark.parametrize(
    ("cluster", "read", "expected"),
    [
        ((None, None), PodLifeUsage(1.5, 0.75), (1.5, 0.75)),  # GKE: filled from monitoring
        ((0.3, 0.2), PodLifeUsage(1.5, 0.75), (0.3, 0.2)),  # the cluster's own figures stay
        ((None, None), PodLifeUsage(0.5, None), (0.5, None)),  # one point: no CPU span
        ((None, None), None, (None, None)),  # no point at all: nothing to size from
    ],
)
def test_with_usage_fills_only_what_the_cluster_left_empty(cluster, read, expected) -> None:
    pod = pod_info("a", "Succeeded", peak_memory_gib=cluster[0], cpu_used=cluster[1])
    (got,) = with_usage([pod], {} if read is None else {pod.name: read})
    assert (got.peak_memory_gib, got.cpu_used) == expected


# -- job.rightsize: auto records a config version (shared.reconcile.rightsize_version)
# ------------------


def _started_l3(tmp_path: Path, mode: str, requests: tuple[float, float] | None = None):
    """A run whose L2 used 0.4 vCPU / 1.6 GiB, deciding to create L3's Job at `requests`
    (default: what `auto` sizes it to: 0.5 / 1.75 at margin 1)."""
    from shared.reconcile.build_plan import new_run
    from shared.reconcile.decision import Decision

    cfg = load_config(_write(tmp_path, f"  rightsize: {mode}\n  rightsize_margin: 1.0\n"))
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    l2, l3 = run.layers["ingest-L2"], run.layers["ingest-L3"]
    l2.phase = "succeeded"
    note_usage(l2, [PodFigures(0.4, 1.6)])
    l3.phase, l3.job.name = "running", "job-ingest-3"
    l3.pods.cpu_request, l3.pods.memory_request_gib = requests or (0.5, 1.75)
    at = l3.timing.submitted_at = T0 + timedelta(minutes=5)
    return cfg, Decision(run, [CreateJob("ingest", 3, "job-ingest-3", 2)], at, changed=True)


def test_auto_records_a_config_version_by_rightsize(tmp_path: Path) -> None:
    from shared.jobs.layer_spec import layer_spec
    from shared.reconcile.rightsize_version import with_rightsize_version

    cfg, decision = _started_l3(tmp_path, "auto")
    before = decision.state.config_version
    got = with_rightsize_version(decision)
    (entry,) = got.config_versions
    configured = layer_spec(cfg, "ingest", 3).requests
    prefix = "config.job.workloads.ingest.resources.overrides.3"
    assert entry["version"] == got.state.config_version == before + 1
    assert (entry["by"], entry["at"], entry["forced"]) == ("rightsize", decision.at, False)
    assert [(c["key"], c["old"], c["new"]) for c in entry["changes"]] == [
        (f"{prefix}.cpu", configured.cpu, 0.5),
        (f"{prefix}.memory", configured.memory_gib, 1.75),
    ]
    assert commit_record(cfg, Plan({}), got).config_versions == [entry]


@pytest.mark.parametrize(
    ("mode", "requests", "job_name"),
    [
        ("suggest", None, "job-ingest-3"),  # shown, never applied: no version
        ("auto", "configured", "job-ingest-3"),  # sized to what the config asks: no change
        ("auto", None, "job-ingest-3-canary"),  # another Job (a canary): not the layer's
        ("auto", "re-created", "job-ingest-3"),  # its Job re-created later: recorded already
    ],
)
def test_no_config_version_without_a_right_sized_change(
    tmp_path: Path, mode: str, requests: str | None, job_name: str
) -> None:
    from shared.jobs.layer_spec import layer_spec
    from shared.reconcile.rightsize_version import with_rightsize_version

    cfg = load_config(_write(tmp_path, "  rightsize: auto\n"))
    own = layer_spec(cfg, "ingest", 3).requests
    _, decision = _started_l3(
        tmp_path, mode, (own.cpu, own.memory_gib) if requests == "configured" else None
    )
    decision.actions[0] = CreateJob("ingest", 3, job_name, 2)
    if requests == "re-created":
        decision.state.layers["ingest-L3"].timing.submitted_at = T0
    version = decision.state.config_version
    got = with_rightsize_version(decision)
    assert got.config_versions == [] and got.state.config_version == version
