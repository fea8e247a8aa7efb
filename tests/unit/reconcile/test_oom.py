"""Out-of-memory kills: counted per layer from the pods' reason, alerted once per layer, and
the next attempt's memory raised by `job.oom_memory_factor` (off by default), snapped."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from shared.config.config_files import load_config
from shared.model.state import Faults, LayerState, RunState
from shared.operate.operator_actions import resubmit
from shared.ports.cluster import PodInfo
from shared.reconcile.build_plan import new_run, plan_for
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, LayerPlan, Plan, Snapshot
from shared.reconcile.oom import next_memory_factor, with_memory_factors
from shared.views.progress import LayerPods, LayerSize, layer_progress
from tests.builders.decide_runs import RAMP, T0, job, make_run, name_for
from tests.builders.pod_infos import pod_info

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"


def pod(uid: str, reason: str | None, phase: str = "Failed", exit_code: int = 137) -> PodInfo:
    finished = T0 + timedelta(seconds=5)
    return pod_info(
        uid, phase, created=T0, started=T0, finished=finished, exit_code=exit_code, reason=reason
    )


def running_run() -> tuple[RunState, LayerState]:
    run = make_run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", name_for(ls), 10, 2
    ls.pods.memory_request_gib, ls.progress.at, ls.timing.ramp_started_at = 2.0, T0, T0
    return run, ls


def decide_with(run: RunState, pods: list[PodInfo], now: datetime = T0):
    ls = run.layers["ingest-L2"]
    plan = Plan({k: LayerPlan(10, RAMP, job_name=name_for(v)) for k, v in run.layers.items()})
    seen = Snapshot(run, {ls.job.name: job(ls.job.name)}, {ls.job.name: pods})
    return decide(seen, plan, None, now)


@pytest.mark.parametrize(
    ("reasons", "oom", "failed"),
    [
        (["OOMKilled"], 1, 1),
        (["OOMKilled", "OOMKilled", "Error"], 2, 3),
        (["Error"], 0, 1),
        (["DisruptionTarget"], 0, 0),  # preempted: neither a failure nor an OOM kill
        ([], 0, 0),
    ],
)
def test_oom_kills_are_counted_from_the_pods_reason(reasons, oom, failed):
    run, _ = running_run()
    pods = [pod(f"u{i}", r) for i, r in enumerate(reasons)]
    after = decide_with(run, pods).state.layers["ingest-L2"]
    assert (after.faults.oom_killed, after.pods.failed) == (oom, failed)


def test_the_oom_alert_is_sent_once_per_layer_with_the_memory_request():
    run, _ = running_run()
    first = decide_with(run, [pod("u1", "OOMKilled")])
    (alert,) = [a for a in first.actions if isinstance(a, Alert) and a.kind == "oom_killed"]
    assert (alert.stage, alert.layer) == ("ingest", 2)
    assert alert.details["memory_request_gib"] == 2.0 and alert.details["pods"] == 1
    assert "peak_memory_gib" in alert.details
    later = decide_with(first.state, [pod("u1", "OOMKilled"), pod("u2", "OOMKilled")])
    assert later.state.layers["ingest-L2"].faults.oom_killed == 2
    assert not [a for a in later.actions if isinstance(a, Alert) and a.kind == "oom_killed"]


@pytest.mark.parametrize(
    ("oom_killed", "current", "factor", "want"),
    [
        (0, 1.0, 1.5, 1.0),  # no OOM kill: unchanged
        (3, 1.0, None, 1.0),  # off by default
        (1, 1.0, 1.5, 1.5),
        (2, 1.5, 1.5, 2.25),  # compounded per attempt that saw OOM kills
    ],
)
def test_next_memory_factor(oom_killed, current, factor, want):
    ls = LayerState("ingest", 2, faults=Faults(oom_killed=oom_killed, memory_factor=current))
    assert next_memory_factor(ls, factor) == pytest.approx(want)


def test_a_resubmitted_layer_after_oom_kills_asks_for_more_memory_snapped():
    cfg = load_config(DEMO)
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    ls = run.layers["ingest-L3"]
    ls.phase, ls.faults.oom_killed, ls.timing.finished_at = "failed", 2, T0
    before = plan_for(cfg, run).layers["ingest-L3"].memory_gib
    resubmit(run, "ingest", 3, "op", T0, oom_memory_factor=1.5)
    fresh = run.layers["ingest-L3"]
    assert (
        fresh.job.attempt == 1
        and fresh.faults.memory_factor == 1.5
        and fresh.faults.oom_killed == 0
    )
    raised = with_memory_factors(cfg, run)
    plan = plan_for(raised, run).layers["ingest-L3"]
    assert (before, plan.memory_gib) == (0.5, 0.75)  # 0.5 GiB x 1.5, on a 0.25 GiB step
    requests = plan.manifest["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert requests["requests"]["memory"] == "768Mi"
    # Other layers keep the config's memory; a run without raised layers keeps the config.
    assert plan_for(raised, run).layers["ingest-L4"].memory_gib == 0.5
    assert with_memory_factors(cfg, new_run(cfg, "r2", ["ingest"], "auto", T0)) is cfg


def test_without_the_factor_a_resubmit_keeps_the_memory():
    cfg = load_config(DEMO)
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    run.layers["ingest-L2"].phase, run.layers["ingest-L2"].faults.oom_killed = "failed", 1
    resubmit(run, "ingest", 2, "op", T0)
    assert run.layers["ingest-L2"].faults.memory_factor == 1.0


@pytest.mark.parametrize(
    ("stored", "listed", "want"),
    [
        (2, None, 2),  # cluster not read: the layer's own count
        (0, None, None),  # nothing known
        (2, 1, 2),  # the pods of the earlier kills were garbage-collected
        (1, 3, 3),  # the listing saw kills the controller has not recorded yet
    ],
)
def test_status_shows_the_layers_oom_count(stored, listed, want):
    run, ls = running_run()
    ls.faults.oom_killed = stored
    pods = None if listed is None else LayerPods(oom=listed)
    assert layer_progress(run, ls, LayerSize(10, 1), T0, pods=pods).oom == want
