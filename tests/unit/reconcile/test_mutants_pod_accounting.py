"""Behaviour of `shared.reconcile.pod_accounting` that the mutation run found unchecked (issue 9):
the stored pod record, counters that add up across reconciles, pods not started yet, the
watermark's same-instant pods, and closing a layer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.model.state import LayerState
from shared.ports.cluster import PodInfo
from shared.reconcile.pod_accounting import PodRecord, close_layer, pod_key, record_pods

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def pod(uid: str, phase: str = "Running", started: float | None = 0, **kw) -> PodInfo:
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
    p = pod(
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
        "seconds": 20.0,
    }


def test_pod_keys_are_16_hex_digits() -> None:
    key = pod_key("some-uid")
    assert len(key) == 16 and int(key, 16) >= 0


@pytest.mark.parametrize(
    ("phase", "reason", "field"),
    [
        ("Succeeded", None, "pods_succeeded"),
        ("Failed", "DisruptionTarget", "pods_preempted"),
        ("Failed", "Error", "pods_failed"),
    ],
)
def test_pod_counters_add_to_what_earlier_reconciles_counted(phase, reason, field) -> None:
    ls = LayerState("ingest", 2, succeeded_runtime_s=100.0)
    setattr(ls, field, 3)
    record_pods(ls, [pod("u", phase, finished=at(30), reason=reason)], at(40))
    assert getattr(ls, field) == 4
    assert ls.succeeded_runtime_s == (130.0 if phase == "Succeeded" else 100.0)


@pytest.mark.parametrize("started", [None, 60])  # not started yet; started at the listing
def test_a_pod_that_has_not_run_yet_accrues_nothing(started) -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("u", "Pending" if started is None else "Running", started)], at(60))
    assert (ls.running_cpu_seconds, ls.running_memory_gib_seconds) == (0.0, 0.0)


def test_a_pod_that_vanishes_before_it_ran_adds_nothing() -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("u", "Pending", None)], at(60))
    record_pods(ls, [], at(120))
    assert (ls.cpu_seconds, ls.memory_gib_seconds) == (0.0, 0.0)


def test_a_vanished_pod_keeps_its_memory_and_cpu_apart_from_a_pod_still_listed() -> None:
    ls = LayerState("ingest", 2, cpu_seconds=1.0, memory_gib_seconds=3.0)  # recorded before
    b = pod("b", started=30, memory_request_gib=4.0)
    record_pods(ls, [pod("a"), b], at(60))  # a: 60 s, b: 30 s so far
    record_pods(ls, [b], at(100))
    assert (ls.cpu_seconds, ls.memory_gib_seconds) == (1.0 + 0.5 * 60, 3.0 + 2.0 * 60)
    assert (ls.running_cpu_seconds, ls.running_memory_gib_seconds) == (0.5 * 70, 4.0 * 70)


def test_a_document_without_a_listing_time_closes_nothing() -> None:
    """Open pods from a document written before `pods_listed_at` existed: nothing to close
    them at, so nothing is added (and nothing raises)."""
    ls = LayerState("ingest", 2, open_pods=[pod_key("gone")], running_cpu_seconds=5.0)
    record_pods(ls, [], at(60))
    assert ls.cpu_seconds == 0.0


def test_a_pod_missing_from_one_listing_and_back_finished_is_not_counted_twice() -> None:
    """A listing can miss a pod created at the watermark's instant; when it shows up again
    finished, it was already closed at its last sighting."""
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("a"), pod("b")], at(60))
    record_pods(ls, [pod("b")], at(70))  # "a" missing: closed at 60 s
    record_pods(ls, [pod("a", "Succeeded", finished=at(80)), pod("b")], at(90))
    assert ls.cpu_seconds == pytest.approx(0.5 * 60)
    assert ls.pods_succeeded == 0


def test_a_pod_created_at_the_watermark_instant_is_recorded_once() -> None:
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("a")], at(60))
    late = pod("b", "Succeeded", finished=at(65))  # created at T0 too, listed late
    listing = [pod("a"), late]
    assert [r.uid for r in record_pods(ls, listing, at(70))] == ["b"]
    assert record_pods(ls, listing, at(80)) == []


def test_the_watermark_keeps_only_the_pods_created_at_it() -> None:
    """The layer document holds the uids at the newest creation instant, not every uid."""
    ls = LayerState("ingest", 2)
    record_pods(ls, [pod("a")], at(60))
    record_pods(ls, [pod("a"), pod("c", created=at(10))], at(70))
    assert (ls.pods_watermark, ls.pods_at_watermark) == (at(10), ["c"])


def test_closing_a_layer_adds_its_running_usage_to_what_was_recorded() -> None:
    ls = LayerState("ingest", 2, cpu_seconds=10.0, memory_gib_seconds=20.0)
    ls.running_cpu_seconds, ls.running_memory_gib_seconds, ls.open_pods = 5.0, 7.0, ["k"]
    close_layer(ls)
    assert (ls.cpu_seconds, ls.memory_gib_seconds) == (15.0, 27.0)
    assert (ls.running_cpu_seconds, ls.running_memory_gib_seconds, ls.open_pods) == (0.0, 0.0, [])


def test_a_vanished_pod_accrues_the_layers_requests_up_to_the_jobs_record() -> None:
    ls = LayerState("ingest", 2, cpu_request=0.5, memory_request_gib=2.0)
    record_pods(ls, [pod("a")], at(60))
    record_pods(ls, [], at(200), at(100))  # the Job vouches for it until 100 s
    assert (ls.cpu_seconds, ls.memory_gib_seconds) == (0.5 * 100, 2.0 * 100)
