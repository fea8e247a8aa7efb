"""Node-pressure evictions (shared.reconcile.evictions): told apart from Spot preemptions on GKE's
pod shapes, counted per index of a layer attempt, alerted once per index after
`job.max_evictions_per_index`, and the next attempt's memory raised as after an OOM kill."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.gke.wire import pod_info as wire_pod_info
from shared.config.config import JobOverride
from shared.config.config_files import load_config
from shared.control.alerts import alert_body
from shared.jobs.layer_spec import layer_spec
from shared.model.state import Faults, JobAttempt, LayerState, PodUsage, RunState
from shared.ports.cluster import PodInfo
from shared.reconcile.build_plan import new_run, plan_for
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, LayerPlan, Plan, Snapshot
from shared.reconcile.evictions import (
    ALERT_KIND,
    count_evictions,
    format_counts,
    parse_counts,
    pod_evicted,
    total_evictions,
)
from shared.reconcile.oom import next_memory_factor
from tests.builders.decide_runs import RAMP, T0, job, make_run, name_for
from tests.builders.pod_infos import pod_info

PODS = Path(__file__).resolve().parents[2] / "fixtures" / "gke_pods"
DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"

# fixture -> (DisruptionTarget reason, status.reason, a node-pressure eviction?)
SHAPES = {
    "evicted_node_memory_pressure": ("TerminationByKubelet", "Evicted", True),
    "spot_node_shutdown": ("TerminationByKubelet", "Terminated", False),
    "spot_node_shutdown_before_1_26": ("TerminationByKubelet", "Shutdown", False),
    "preempted_by_scheduler": ("PreemptionByScheduler", None, False),
    "deleted_by_pod_gc": ("DeletionByPodGC", None, False),
    "evicted_by_eviction_api": ("EvictionByEvictionAPI", None, False),
}


@pytest.mark.parametrize(("fixture", "want"), SHAPES.items(), ids=SHAPES.keys())
def test_gke_pod_shapes_carry_the_reasons_and_only_the_kubelets_eviction_counts(
    fixture: str, want: tuple[str, str | None, bool]
) -> None:
    raw = json.loads((PODS / f"{fixture}.json").read_text())
    info = wire_pod_info(raw)
    disruption, status, evicted = want
    assert (info.reason, info.disruption_reason, info.status_reason) == (
        "DisruptionTarget",
        disruption,
        status,
    )
    assert pod_evicted(info) is evicted


def disrupted(
    uid: str,
    index: int,
    disruption: str | None = "TerminationByKubelet",
    status: str | None = "Evicted",
    phase: str = "Failed",
) -> PodInfo:
    return pod_info(
        uid,
        phase,
        index=index,
        finished=T0 + timedelta(seconds=5),
        exit_code=137,
        reason="DisruptionTarget",
        disruption_reason=disruption,
        status_reason=status,
    )


EVICTED, SHUTDOWN = ("TerminationByKubelet", "Evicted"), ("TerminationByKubelet", "Terminated")
PREEMPTED, NO_REASON = ("PreemptionByScheduler", None), (None, None)

# pods as (index, (condition reason, status.reason)) -> counts, pods_preempted
COUNTING = {
    "one eviction": ([(0, EVICTED)], "0:1", 1),
    "same index twice": ([(0, EVICTED), (0, EVICTED)], "0:2", 2),
    "two indexes": ([(4, EVICTED), (1, EVICTED), (4, EVICTED)], "1:1,4:2", 3),
    "Spot node shutdown is free": ([(0, SHUTDOWN)], "", 1),
    "scheduler preemption is free": ([(0, PREEMPTED)], "", 1),
    "a condition without a reason is free": ([(0, NO_REASON)], "", 1),
    "mixed": ([(2, EVICTED), (2, SHUTDOWN), (2, PREEMPTED), (2, EVICTED)], "2:2", 4),
}


@pytest.mark.parametrize(("pods", "counts", "preempted"), COUNTING.values(), ids=COUNTING.keys())
def test_evictions_are_counted_per_index_and_preemptions_are_not(pods, counts, preempted):
    run, ls = running_run()
    listed = [disrupted(f"u{n}", i, *why) for n, (i, why) in enumerate(pods)]
    after = decide_with(run, listed).state.layers[ls.key]
    assert after.faults.evictions == counts
    assert after.pods.preempted == preempted  # disrupted pods: the Job spent no retry on them
    assert after.pods.failed == 0


def test_a_listing_seen_again_counts_nothing_twice() -> None:
    run, ls = running_run()
    pods = [disrupted("u0", 0), disrupted("u1", 0)]
    once = decide_with(run, pods).state
    twice = decide_with(once, pods).state
    assert twice.layers[ls.key].faults.evictions == "0:2"


def test_a_running_pod_with_an_eviction_condition_is_not_counted_until_it_has_failed() -> None:
    run, ls = running_run()
    assert (
        decide_with(run, [disrupted("u0", 0, phase="Running")])
        .state.layers[ls.key]
        .faults.evictions
        == ""
    )


# evictions of index 0 before, new ones now, limit -> alerted indexes (None: no alert)
DECISIONS = {
    "below the limit": ("", [0, 0], 3, None),
    "reaches the limit": ("", [0, 0, 0], 3, [0]),
    "reaches it over two reconciles": ("0:2", [0], 3, [0]),
    "limit 1": ("", [5], 1, [5]),
    "two indexes at once": ("1:2", [1, 2, 2], 2, [1, 2]),
    "only the one that reached it": ("", [1, 1, 2], 2, [1]),
}


@pytest.mark.parametrize(
    ("before", "new", "limit", "alerted"), DECISIONS.values(), ids=DECISIONS.keys()
)
def test_an_index_is_alerted_when_it_reaches_max_evictions_per_index(before, new, limit, alerted):
    run, ls = running_run()
    ls.faults.evictions = before
    pods = [disrupted(f"u{n}", i) for n, i in enumerate(new)]
    decision = decide_with(run, pods, limit=limit)
    alerts = [a for a in decision.actions if isinstance(a, Alert) and a.kind == ALERT_KIND]
    if alerted is None:
        assert alerts == []
        return
    [alert] = alerts
    assert (alert.stage, alert.layer) == ("ingest", 2)
    assert alert.details["indexes"] == alerted
    counts = parse_counts(decision.state.layers[ls.key].faults.evictions)
    assert alert.details["evictions"] == {str(i): counts[i] for i in alerted}
    assert alert.details["max_evictions_per_index"] == limit
    assert alert.details["job"] == ls.job.name
    assert "pipeline submit" in alert.details["fix"]


def test_each_index_is_alerted_once_and_a_later_one_on_its_own() -> None:
    run, ls = running_run()
    first = decide_with(run, [disrupted(f"u{n}", 0) for n in range(3)], limit=3)
    assert first.state.layers[ls.key].faults.eviction_alerted_indexes == "0"
    pods = [disrupted(f"u{n}", 0) for n in range(4)] + [disrupted(f"v{n}", 7) for n in range(3)]
    second = decide_with(first.state, pods, limit=3)
    [alert] = [a for a in second.actions if isinstance(a, Alert) and a.kind == ALERT_KIND]
    assert alert.details["indexes"] == [7]  # index 0 (now 4 evictions) is not alerted again
    third = decide_with(second.state, pods, limit=3)
    assert [a for a in third.actions if isinstance(a, Alert) and a.kind == ALERT_KIND] == []
    assert total_evictions(third.state.layers[ls.key]) == 7


def test_the_limit_is_read_from_the_config_per_stage() -> None:
    cfg = load_config(DEMO)
    overrides = {"l2cache": JobOverride(max_evictions_per_index=5)}
    cfg = cfg.model_copy(update={"job": cfg.job.model_copy(update={"workloads": overrides})})
    run = new_run(cfg, "r1", ["ingest", "l2cache"], "auto", T0)
    plan = plan_for(cfg, run)
    assert plan.layers["ingest-L2"].max_evictions_per_index == 3  # the default
    assert plan.layers["l2cache-L2"].max_evictions_per_index == 5


# (OOM kills, an index evicted repeatedly, job.oom_memory_factor) -> the next attempt's factor
MEMORY = {
    "evicted repeatedly, factor on": (0, True, 1.5, 1.5),
    "evicted repeatedly, factor off": (0, True, None, 1.0),
    "evicted below the limit": (0, False, 1.5, 1.0),
    "OOM kills as before": (2, False, 1.5, 1.5),
    "both: raised once": (1, True, 2.0, 2.0),
}


@pytest.mark.parametrize(("oom", "evicted", "factor", "want"), MEMORY.values(), ids=MEMORY.keys())
def test_the_next_attempt_asks_more_memory_after_repeated_evictions(oom, evicted, factor, want):
    ls = LayerState(
        "ingest", 2, faults=Faults(oom_killed=oom, eviction_alerted_indexes="3" if evicted else "")
    )
    ls.faults.evictions = "3:3" if evicted else "3:1"
    assert next_memory_factor(ls, factor) == pytest.approx(want)


def test_the_alert_carries_each_indexs_chunks() -> None:
    cfg = load_config(DEMO)
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    details = {"indexes": [1, 3], "evictions": {"1": 3, "3": 4}, "job": "j", "fix": "f"}
    body = alert_body(cfg, run, Alert(ALERT_KIND, "ingest", 2, details), T0)
    spec = layer_spec(cfg, "ingest", 2)
    assert body["kind"] == ALERT_KIND and body["indexes"] == "1,3" and body["index_count"] == 2
    assert body["batches"] == [
        {"index": i, "evictions": n, "chunks": [list(c) for c in spec.batch_chunks(i)]}
        for i, n in ((1, 3), (3, 4))
    ]
    assert all(body["batches"][k]["chunks"] for k in (0, 1))


@pytest.mark.parametrize(
    ("text", "counts"), [("", {}), ("3:1,17:2", {3: 1, 17: 2}), (" 5:1 , 5:2", {5: 3})]
)
def test_packed_counts_round_trip(text: str, counts: dict[int, int]) -> None:
    assert parse_counts(text) == counts
    assert parse_counts(format_counts(counts)) == counts
    ls = LayerState("ingest", 2, faults=Faults(evictions=text))
    count_evictions(ls, [9])
    assert parse_counts(ls.faults.evictions) == {**counts, 9: counts.get(9, 0) + 1}


@pytest.mark.parametrize("bad", ["3", "x:1", "3:0", "-1:2", "3:y"])
def test_bad_packed_counts_name_the_part(bad: str) -> None:
    with pytest.raises(ValueError, match="bad eviction count"):
        parse_counts(bad)


def running_run() -> tuple[RunState, LayerState]:
    run = make_run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", name_for(ls), 10, 2
    ls.pods.memory_request_gib, ls.progress.at, ls.timing.ramp_started_at = 2.0, T0, T0
    return run, ls


def decide_with(run: RunState, pods: list[PodInfo], limit: int = 3):
    ls = run.layers["ingest-L2"]
    plan = Plan(
        {
            k: LayerPlan(10, RAMP, job_name=name_for(v), max_evictions_per_index=limit)
            for k, v in run.layers.items()
        }
    )
    seen = Snapshot(run, {ls.job.name: job(ls.job.name)}, {ls.job.name: pods})
    return decide(seen, plan, None, T0)


# Tables that kill mutants the mutation runner found alive (docs/testing-mutation.md).


def test_eviction_alert_details_in_full():
    from shared.reconcile.evictions import eviction_alert_details

    ls = LayerState(
        stage="ingest", layer=2, job=JobAttempt(name="j2"), pods=PodUsage(memory_request_gib=2.5)
    )
    ls.faults.evictions = "3:4"  # index 3 evicted 4 times (the stored "index:count" form)
    assert eviction_alert_details(ls, 3) == {
        "indexes": [3],
        "evictions": {"3": 4},
        "max_evictions_per_index": 3,
        "job": "j2",
        "memory_request_gib": 2.5,
        "fix": "the kubelet evicts these pods for node memory pressure (they use more than "
        "their request) and the Job retries them without end: raise job.resources.memory for "
        "this layer (`pipeline apply`) or set job.oom_memory_factor, then `pipeline delete` "
        "and `pipeline submit` the layer (done chunks are skipped)",
    }


def test_eviction_counts_text_skips_empty_parts_and_zero_counts():
    from shared.reconcile.evictions import format_counts, parse_counts

    assert parse_counts("1:2,,3:4") == {1: 2, 3: 4}
    assert format_counts({3: 0, 4: 1}) == "4:1"
