"""What pod accounting loses when pods vanish between two listings (issue 9).

Kubernetes deletes pods on suspend, scale-down, pod GC and node loss, and the local cluster
now does too. Accounting closes a vanished pod at its last sighting, or at its Job's record of
it (a Complete Job's completion time) when that is later.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.model.state import LayerState
from shared.ports.cluster import PodInfo
from shared.reconcile.pod_accounting import record_pods
from tests.builders.pod_infos import pod_info

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def running(uid: str, started: float = 0.0) -> PodInfo:
    at = T0 + timedelta(seconds=started)
    return pod_info(uid, memory_request_gib=1.0, created=at, started=at)


def test_a_pod_seen_running_then_gone_keeps_its_runtime_to_the_last_sighting() -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [running("a")], T0 + timedelta(seconds=60))  # seen running, 60 s in
    record_pods(ls, [], T0 + timedelta(seconds=120))  # deleted (suspend, node lost, ...)
    assert ls.pods.cpu_seconds + ls.pods.running_cpu_seconds >= 60.0


def test_a_vanished_pod_is_closed_at_its_last_sighting_not_later() -> None:
    """Two pods open; one vanishes, the other runs on and then finishes: the vanished one
    counts 60 s (its last sighting), the other its full runtime, nothing twice."""
    ls = LayerState("ingest", 2)
    record_pods(ls, [running("a"), running("b", started=30)], T0 + timedelta(seconds=60))
    b_done = replace(
        running("b", started=30), phase="Succeeded", finished=T0 + timedelta(seconds=150)
    )
    record_pods(ls, [b_done], T0 + timedelta(seconds=200))
    assert ls.pods.cpu_seconds == pytest.approx(60.0 + 120.0)
    assert ls.pods.running_cpu_seconds == 0.0
    record_pods(ls, [b_done], T0 + timedelta(seconds=260))  # a repeat listing adds nothing
    assert ls.pods.cpu_seconds == pytest.approx(180.0)


def _layer(cpu: float = 1.0, memory_gib: float = 2.0) -> LayerState:
    ls = LayerState("ingest", 2)
    ls.pods.cpu_request, ls.pods.memory_request_gib = cpu, memory_gib
    return ls


# Pod "a" runs from T0 and is last seen at T0+60 s; the next listing (at T0+200 s) lacks it.
# It is closed at the later of its last sighting and the Job's record, never after the listing.
@pytest.mark.parametrize(
    ("job_record_s", "vanished", "want_cpu_s"),
    [
        (None, ["a"], 60.0),  # no record: the last sighting
        (100, ["a"], 100.0),  # the Job vouches for it to 100 s
        (30, ["a"], 60.0),  # a record before the sighting does not shorten it
        (60, ["a"], 60.0),  # the same instant: nothing added
        (500, ["a"], 200.0),  # a record after the listing is capped at the listing
        (100, ["a", "b"], 200.0),  # each vanished pod accrues its own time
    ],
)
def test_a_vanished_pod_is_closed_at_the_later_of_its_sighting_and_the_jobs_record(
    job_record_s, vanished, want_cpu_s
) -> None:
    ls = _layer()
    pods = [replace(running(u), memory_request_gib=2.0) for u in vanished]
    record_pods(ls, pods, T0 + timedelta(seconds=60))
    record = None if job_record_s is None else T0 + timedelta(seconds=job_record_s)
    record_pods(ls, [], T0 + timedelta(seconds=200), record)
    assert ls.pods.cpu_seconds == pytest.approx(want_cpu_s)
    assert ls.pods.memory_gib_seconds == pytest.approx(2.0 * want_cpu_s)
    assert ls.pods.running_cpu_seconds == 0.0


def test_the_jobs_record_extends_only_the_vanished_pods() -> None:
    """ "b" is still listed, running: it accrues by its own start, not by the Job's record."""
    ls = _layer()
    record_pods(ls, [running("a"), running("b", started=30)], T0 + timedelta(seconds=60))
    record_pods(
        ls, [running("b", started=30)], T0 + timedelta(seconds=200), T0 + timedelta(seconds=100)
    )
    assert ls.pods.cpu_seconds == pytest.approx(60.0 + 40.0)  # "a": to the Job's record
    assert ls.pods.running_cpu_seconds == pytest.approx(170.0)  # "b": 30 s .. 200 s


def test_a_repeat_listing_with_the_jobs_record_adds_nothing() -> None:
    ls = _layer()
    record_pods(ls, [running("a")], T0 + timedelta(seconds=60))
    record = T0 + timedelta(seconds=100)
    record_pods(ls, [], T0 + timedelta(seconds=200), record)
    record_pods(ls, [], T0 + timedelta(seconds=260), record)
    assert ls.pods.cpu_seconds == pytest.approx(100.0)


def test_reconcile_closes_a_vanished_pod_at_its_complete_jobs_completion_time() -> None:
    from shared.config.config import Ramp
    from shared.model.state import RunState, build_layers
    from shared.ports.cluster import JobStatus
    from shared.reconcile.decide import decide
    from shared.reconcile.decision import LayerPlan, Plan, Snapshot

    run = RunState(
        run_id="r1",
        graph_id="g",
        stages=["ingest"],
        top_layers={"ingest": 2},
        advance="auto",
        status="running",
        layers=build_layers(["ingest"], {"ingest": 2}),
    )
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", "j", 1, 1
    ls.pods.cpu_request, ls.pods.memory_request_gib = 1.0, 1.0
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = T0
    record_pods(ls, [running("a")], T0 + timedelta(seconds=60))
    done = JobStatus(
        name="j",
        labels={},
        annotations={},
        completions=1,
        parallelism=1,
        suspended=False,
        succeeded=1,
        completed_indexes="0",
        condition="Complete",
        completion_time=T0 + timedelta(seconds=90),
    )
    plan = Plan({k: LayerPlan(1, Ramp(start=1, max=1), job_name="j") for k in run.layers})
    d = decide(Snapshot(run, {"j": done}, {"j": []}), plan, None, T0 + timedelta(seconds=120))
    got = d.state.layers["ingest-L2"]
    assert got.phase == "succeeded"
    assert got.pods.cpu_seconds == pytest.approx(90.0)
