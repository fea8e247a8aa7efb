"""Pod accounting and cost roll-ups, table-driven: what a reconcile records, what it costs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config.config import Ramp
from shared.model.state import JobAttempt, LayerState, PodUsage, RunState, build_layers
from shared.money.costs import Billing, layer_cost, run_cost
from shared.money.pricing import Rate, RateRow, load_rates
from shared.ports.cluster import JobStatus, PodInfo
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, LayerPlan, PatchJob, Plan, Snapshot
from shared.reconcile.pod_accounting import (
    OPEN_PAGE,
    PodRecord,
    close_layer,
    pack_open,
    pod_key,
    record_pods,
    unpack_open,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RATE = Rate("r", "general-purpose", True, cpu_hr=3600.0, mem_hr=360.0, cluster_fee_hr=36.0)


def pod(
    uid: str,
    phase: str = "Running",
    created: int = 0,
    started: int = 0,
    finished: int | None = None,
    reason: str | None = None,
    index: int = 0,
) -> PodInfo:
    return PodInfo(
        name=f"p-{uid}",
        uid=uid,
        job_name="j",
        index=index,
        phase=phase,
        cpu_request=0.5,
        memory_request_gib=2.0,
        created=T0 + timedelta(seconds=created),
        started=T0 + timedelta(seconds=started),
        finished=None if finished is None else T0 + timedelta(seconds=finished),
        reason=reason,
    )


def test_records_each_finished_pod_once_across_reconciles():
    ls = LayerState("ingest", 2)
    now = T0 + timedelta(seconds=100)
    first = record_pods(ls, [pod("a"), pod("b")], now)
    assert first == [] and unpack_open(ls.pods.open) == {pod_key("a"), pod_key("b")}
    assert ls.pods.running_cpu_seconds == pytest.approx(2 * 0.5 * 100)
    listing = [
        pod("a", "Succeeded", finished=10),
        pod("b"),
        pod("c", "Failed", created=50, started=50, finished=60),
    ]
    second = record_pods(ls, listing, now)
    assert sorted(r.uid for r in second) == ["a", "c"]
    assert record_pods(ls, listing, now) == []  # the same listing again: nothing new
    assert (ls.pods.succeeded, ls.pods.failed) == (1, 1)
    assert ls.pods.cpu_seconds == pytest.approx(0.5 * 10 + 0.5 * 10)
    assert ls.pods.memory_gib_seconds == pytest.approx(2.0 * 20)


def test_pod_created_and_finished_between_listings_is_recorded():
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("a", created=5)], T0)
    unseen = pod("z", "Succeeded", created=7, started=7, finished=9)
    assert [r.uid for r in record_pods(ls, [pod("a", created=5), unseen], T0)] == ["z"]


def test_same_second_creation_is_not_lost_or_doubled():
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("a", "Succeeded", created=5, finished=6)], T0)
    late = pod("b", "Succeeded", created=5, finished=7)  # same creation second, listed later
    assert [
        r.uid for r in record_pods(ls, [pod("a", "Succeeded", created=5, finished=6), late], T0)
    ] == ["b"]


def test_preemptions_counted_apart():
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("a", "Failed", finished=3, reason="DisruptionTarget")], T0)
    assert (ls.pods.preempted, ls.pods.failed) == (1, 0)


@pytest.mark.parametrize(
    ("cpu_s", "mem_s", "phase", "completions", "succeeded", "runtime", "want_usd", "backfill"),
    [
        (3600, 0, "running", 10, 0, 0, 3600.0, 0),  # 1 vCPU-hour at 3600 $/h
        (0, 3600, "running", 10, 0, 0, 360.0, 0),
        (0, 0, "succeeded", 4, 2, 20, 2 * 10 * (0.5 * 1 + 2 * 0.1), 2),  # 2 unseen at 10 s mean
        (0, 0, "succeeded", 2, 2, 20, 0.0, 0),
    ],
)
def test_layer_cost(cpu_s, mem_s, phase, completions, succeeded, runtime, want_usd, backfill):
    ls = LayerState(
        "ingest",
        2,
        phase=phase,
        job=JobAttempt(completions=completions),
        pods=PodUsage(
            cpu_seconds=cpu_s,
            memory_gib_seconds=mem_s,
            succeeded=succeeded,
            succeeded_runtime_s=runtime,
            cpu_request=0.5,
            memory_request_gib=2.0,
        ),
    )
    cost = layer_cost(ls, RATE)
    assert cost.usd == pytest.approx(want_usd)
    assert cost.backfilled_pods == backfill


def test_close_layer_stops_accrual():
    ls = LayerState("ingest", 2, pods=PodUsage(running_cpu_seconds=5.0, open=["x"]))
    close_layer(ls)
    assert (ls.pods.running_cpu_seconds, ls.pods.open) == (0.0, [])


def run_with(spans: list[tuple[int, int | None]]) -> RunState:
    tops = {"ingest": 1 + len(spans)}
    run = RunState("r", "g", ["ingest"], tops, layers=build_layers(["ingest"], tops))
    for ls, (start, end) in zip(run.ordered_layers(), spans, strict=True):
        ls.timing.submitted_at = T0 + timedelta(hours=start)
        ls.timing.finished_at = None if end is None else T0 + timedelta(hours=end)
        ls.phase = "running" if end is None else "succeeded"
    return run


@pytest.mark.parametrize(
    ("spans", "now_h", "fee_hours"),
    [
        ([(0, 1)], 5, 1.0),
        ([(0, 2), (1, 3)], 5, 3.0),
        ([(0, 1), (2, 3)], 5, 2.0),
        ([(0, None)], 4, 4.0),
    ],
)
def test_cluster_fee_over_union_of_job_spans(spans, now_h, fee_hours):
    cost = run_cost(run_with(spans), load_rates(), Billing("us-east1"), T0 + timedelta(hours=now_h))
    assert cost.cluster_fee_usd == pytest.approx(0.1 * fee_hours)


def test_unknown_region_names_the_known_ones():
    with pytest.raises(ValueError, match="region"):
        run_cost(run_with([(0, 1)]), load_rates(), Billing("mars-north1"), T0)


# $1 per vCPU-second on Spot, nothing else: a layer's spend is its recorded vCPU-seconds.
DOLLAR_PER_CPU_S = (RateRow("test", "general-purpose", 0.0, 3600.0, 0.0, 0.0, 0.0),)


@pytest.mark.parametrize(("cpu_seconds", "paused"), [(12.5, True), (10.0, True), (9.0, False)])
def test_budget_guard_pauses_suspends_and_alerts_once(cpu_seconds, paused):
    tops = {"ingest": 3}
    run = RunState(
        "r",
        "g",
        ["ingest"],
        tops,
        advance="auto",
        budget_usd=10.0,
        layers=build_layers(["ingest"], tops),
    )
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.progress.at = "running", "j2", 5, T0
    ls.timing.submitted_at, ls.pods.cpu_seconds = T0, cpu_seconds
    jobs = {"j2": JobStatus("j2", {}, {}, completions=5, parallelism=2, suspended=False)}
    plan = Plan({k: LayerPlan(5, Ramp()) for k in run.layers}, billing=Billing("test"))
    d = decide(Snapshot(run, jobs), plan, DOLLAR_PER_CPU_S, T0)
    assert (d.state.status == "paused") is paused
    assert (PatchJob("j2", suspend=True) in d.actions) is paused
    alerts = [a for a in d.actions if isinstance(a, Alert)]
    assert [a.kind for a in alerts] == (["budget_reached"] if paused else [])
    if paused:
        assert alerts[0].details == {
            "spend_usd": cpu_seconds,
            "budget_usd": 10.0,
            "pods_usd": cpu_seconds,
            "cluster_fee_usd": 0.0,
        }
    d2 = decide(Snapshot(d.state, jobs), plan, DOLLAR_PER_CPU_S, T0)
    assert not [a for a in d2.actions if isinstance(a, Alert)]


def test_budget_guard_needs_rates_and_billing():
    tops = {"ingest": 2}
    run = RunState(
        "r", "g", ["ingest"], tops, budget_usd=1.0, layers=build_layers(["ingest"], tops)
    )
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.timing.submitted_at, ls.pods.cpu_seconds = "running", "j2", T0, 100.0
    jobs = {"j2": JobStatus("j2", {}, {}, completions=5, parallelism=2, suspended=False)}
    plans = {k: LayerPlan(5, Ramp()) for k in run.layers}
    for plan, rates in [
        (Plan(plans), DOLLAR_PER_CPU_S),
        (Plan(plans, billing=Billing("test")), None),
    ]:
        assert decide(Snapshot(run, jobs), plan, rates, T0).state.status == "running"


def test_open_pods_pack_into_few_strings_and_read_back():
    keys = [pod_key(f"uid-{i}") for i in range(OPEN_PAGE * 2 + 1)]
    packed = pack_open(reversed(keys))
    assert len(packed) == 3 and unpack_open(packed) == set(keys)
    assert packed == pack_open(keys)  # order-independent: an unchanged set compares equal


def test_open_pods_of_an_older_document_are_still_recognised():
    """Layer documents written before packing hold one raw uid per entry."""
    ls = LayerState("ingest", 2, pods=PodUsage(open=["a"], watermark=T0 + timedelta(seconds=99)))
    done = record_pods(ls, [pod("a", "Succeeded", finished=10)], T0 + timedelta(seconds=100))
    assert [r.uid for r in done] == ["a"]


def test_many_running_pods_are_recorded_once_each_when_they_finish():
    ls = LayerState("ingest", 2)
    now = T0 + timedelta(seconds=100)
    running = [pod(f"u{i}") for i in range(5000)]
    assert record_pods(ls, running, now) == []
    assert len(ls.pods.open) == 3
    finished = [pod(f"u{i}", "Succeeded", finished=20) for i in range(5000)]
    assert len(record_pods(ls, finished, now)) == 5000
    assert record_pods(ls, finished, now) == [] and ls.pods.open == []


# Behaviour of `shared.reconcile.pod_accounting` that the mutation run found unchecked (issue 9):
# the stored pod record, counters that add up across reconciles, pods not started yet, the
# watermark's same-instant pods, and closing a layer.


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def billed_pod(uid: str, phase: str = "Running", started: float | None = 0, **kw) -> PodInfo:
    base = dict(
        name=f"p-{uid}",
        uid=uid,
        job_name="j",
        index=3,
        phase=phase,
        cpu_request=0.5,
        memory_request_gib=2.0,
        created=T0,
        started=None if started is None else at(started),
    )
    return PodInfo(**{**base, **kw})


def test_a_pod_record_stores_every_field_of_the_pod_and_its_seconds() -> None:
    p = billed_pod(
        "u",
        "Failed",
        started=5,
        finished=at(25),
        exit_code=42,
        reason="Error",
        node="n1",
        peak_memory_gib=1.5,
        cpu_used=0.25,
    )
    assert PodRecord.of(p).to_doc() == {
        "uid": "u",
        "name": "p-u",
        "index": 3,
        "phase": "Failed",
        "cpu": 0.5,
        "memory_gib": 2.0,
        "created": T0,
        "started": at(5),
        "finished": at(25),
        "exit_code": 42,
        "reason": "Error",
        "node": "n1",
        "disruption_reason": None,
        "status_reason": None,
        "peak_memory_gib": 1.5,
        "cpu_used": 0.25,
        "node_oom_killed": False,
        "seconds": 20.0,
    }


@pytest.mark.parametrize(
    ("reason", "node_oom", "oom", "node"),
    [
        ("OOMKilled", False, 1, 0),  # the container's limit
        ("Error", True, 1, 1),  # the node's OOM killer (its OOMKilling event matched)
        ("OOMKilled", True, 1, 0),  # both said: one kill, the container's
        ("Error", False, 0, 0),
    ],
)
def test_oom_kills_of_either_scope_count_once(reason, node_oom, oom, node) -> None:
    ls = LayerState("ingest", 2)
    pod = billed_pod("u", "Failed", finished=at(30), reason=reason, node_oom_killed=node_oom)
    record_pods(ls, [pod], at(40))
    assert (ls.faults.oom_killed, ls.faults.node_oom_killed) == (oom, node)


def test_pod_keys_are_16_hex_digits() -> None:
    key = pod_key("some-uid")
    assert len(key) == 16 and int(key, 16) >= 0


@pytest.mark.parametrize(
    ("phase", "reason", "field"),
    [
        ("Succeeded", None, "succeeded"),
        ("Failed", "DisruptionTarget", "preempted"),
        ("Failed", "Error", "failed"),
    ],
)
def test_pod_counters_add_to_what_earlier_reconciles_counted(phase, reason, field) -> None:
    ls = LayerState("ingest", 2, pods=PodUsage(succeeded_runtime_s=100.0))
    setattr(ls.pods, field, 3)
    record_pods(ls, [billed_pod("u", phase, finished=at(30), reason=reason)], at(40))
    assert getattr(ls.pods, field) == 4
    assert ls.pods.succeeded_runtime_s == (130.0 if phase == "Succeeded" else 100.0)


@pytest.mark.parametrize("started", [None, 60])  # not started yet; started at the listing
def test_a_pod_that_has_not_run_yet_accrues_nothing(started) -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [billed_pod("u", "Pending" if started is None else "Running", started)], at(60))
    assert (ls.pods.running_cpu_seconds, ls.pods.running_memory_gib_seconds) == (0.0, 0.0)


def test_a_pod_that_vanishes_before_it_ran_adds_nothing() -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [billed_pod("u", "Pending", None)], at(60))
    record_pods(ls, [], at(120))
    assert (ls.pods.cpu_seconds, ls.pods.memory_gib_seconds) == (0.0, 0.0)


def test_a_vanished_pod_keeps_its_memory_and_cpu_apart_from_a_pod_still_listed() -> None:
    ls = LayerState(
        "ingest", 2, pods=PodUsage(cpu_seconds=1.0, memory_gib_seconds=3.0)
    )  # recorded before
    b = billed_pod("b", started=30, memory_request_gib=4.0)
    record_pods(ls, [billed_pod("a"), b], at(60))  # a: 60 s, b: 30 s so far
    record_pods(ls, [b], at(100))
    assert (ls.pods.cpu_seconds, ls.pods.memory_gib_seconds) == (1.0 + 0.5 * 60, 3.0 + 2.0 * 60)
    assert (ls.pods.running_cpu_seconds, ls.pods.running_memory_gib_seconds) == (0.5 * 70, 4.0 * 70)


def test_a_document_without_a_listing_time_closes_nothing() -> None:
    """Open pods from a document written before `pods_listed_at` existed: nothing to close
    them at, so nothing is added (and nothing raises)."""
    ls = LayerState("ingest", 2, pods=PodUsage(open=[pod_key("gone")], running_cpu_seconds=5.0))
    record_pods(ls, [], at(60))
    assert ls.pods.cpu_seconds == 0.0


def test_a_pod_missing_from_one_listing_and_back_finished_is_not_counted_twice() -> None:
    """A listing can miss a pod created at the watermark's instant; when it shows up again
    finished, it was already closed at its last sighting."""
    ls = LayerState("ingest", 2)
    record_pods(ls, [billed_pod("a"), billed_pod("b")], at(60))
    record_pods(ls, [billed_pod("b")], at(70))  # "a" missing: closed at 60 s
    record_pods(ls, [billed_pod("a", "Succeeded", finished=at(80)), billed_pod("b")], at(90))
    assert ls.pods.cpu_seconds == pytest.approx(0.5 * 60)
    assert ls.pods.succeeded == 0


def test_a_pod_created_at_the_watermark_instant_is_recorded_once() -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [billed_pod("a")], at(60))
    late = billed_pod("b", "Succeeded", finished=at(65))  # created at T0 too, listed late
    listing = [billed_pod("a"), late]
    assert [r.uid for r in record_pods(ls, listing, at(70))] == ["b"]
    assert record_pods(ls, listing, at(80)) == []


def test_the_watermark_keeps_only_the_pods_created_at_it() -> None:
    """The layer document holds the uids at the newest creation instant, not every uid."""
    ls = LayerState("ingest", 2)
    record_pods(ls, [billed_pod("a")], at(60))
    record_pods(ls, [billed_pod("a"), billed_pod("c", created=at(10))], at(70))
    assert (ls.pods.watermark, ls.pods.at_watermark) == (at(10), ["c"])


def test_closing_a_layer_adds_its_running_usage_to_what_was_recorded() -> None:
    ls = LayerState("ingest", 2, pods=PodUsage(cpu_seconds=10.0, memory_gib_seconds=20.0))
    ls.pods.running_cpu_seconds, ls.pods.running_memory_gib_seconds, ls.pods.open = 5.0, 7.0, ["k"]
    close_layer(ls)
    assert (ls.pods.cpu_seconds, ls.pods.memory_gib_seconds) == (15.0, 27.0)
    assert (ls.pods.running_cpu_seconds, ls.pods.running_memory_gib_seconds, ls.pods.open) == (
        0.0,
        0.0,
        [],
    )


def test_a_vanished_pod_accrues_the_layers_requests_up_to_the_jobs_record() -> None:
    ls = LayerState("ingest", 2, pods=PodUsage(cpu_request=0.5, memory_request_gib=2.0))
    record_pods(ls, [billed_pod("a")], at(60))
    record_pods(ls, [], at(200), at(100))  # the Job vouches for it until 100 s
    assert (ls.pods.cpu_seconds, ls.pods.memory_gib_seconds) == (0.5 * 100, 2.0 * 100)
