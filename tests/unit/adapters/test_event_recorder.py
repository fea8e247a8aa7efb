"""The event recorder model: token bucket, aggregation, dedupe (table-driven, fake clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.local.cluster.event_recorder import (
    COMBINED_PREFIX,
    EventRecorderModel,
    RecorderSettings,
    TokenBucket,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def event(
    reason: str = "SuccessfulCreate",
    message: str = "Created pod: p-0",
    name: str = "job-a",
    kind: str = "Job",
    component: str = "job-controller",
) -> dict:
    return {
        "metadata": {"name": f"{name}.1", "namespace": "ns"},
        "involvedObject": {
            "kind": kind,
            "namespace": "ns",
            "name": name,
            "uid": f"uid-{name}",
            "apiVersion": "batch/v1",
        },
        "source": {"component": component},
        "type": "Normal",
        "reason": reason,
        "message": message,
    }


@pytest.mark.parametrize(
    ("takes_at", "expected"),
    [
        # 25 at once pass, the 26th finds the bucket empty
        ([0.0] * 26, [True] * 25 + [False]),
        # one token comes back every 300 s, not before
        ([0.0] * 25 + [299.0, 300.0, 301.0], [True] * 25 + [False, True, False]),
        # a long pause refills at most to the burst
        ([0.0] * 25 + [100_000.0] * 26, [True] * 25 + [True] * 25 + [False]),
        # a clock that goes backwards never refills
        ([10.0] * 25 + [5.0], [True] * 25 + [False]),
    ],
)
def test_token_bucket(takes_at: list[float], expected: list[bool]) -> None:
    bucket = TokenBucket.full(25, 300.0, at(takes_at[0]))
    assert [bucket.take(at(t)) for t in takes_at] == expected


def run(model: EventRecorderModel, events: list[tuple[float, dict]]) -> list[tuple[str, str]]:
    out = []
    for t, e in events:
        r = model.record(e, at(t))
        out.append((r.action, "" if r.event is None else r.event["message"]))
    return out


def creates(n: int, t: float = 0.0, name: str = "job-a") -> list[tuple[float, dict]]:
    return [(t, event(message=f"Created pod: p-{i}", name=name)) for i in range(n)]


def test_a_job_of_more_than_25_pods_loses_its_completed_event() -> None:
    model = EventRecorderModel()
    out = run(model, creates(30) + [(60.0, event("Completed", "Job completed"))])
    assert out[-1] == ("drop", "")
    assert sum(a != "drop" for a, _ in out) == 25


def test_the_completed_event_passes_when_the_bucket_has_refilled() -> None:
    model = EventRecorderModel()
    out = run(model, creates(30) + [(300.0, event("Completed", "Job completed"))])
    assert out[-1] == ("create", "Job completed")


def test_buckets_are_per_involved_object_and_source_not_per_reason() -> None:
    model = EventRecorderModel()
    out = run(
        model,
        creates(25)
        + [(1.0, event("Completed", "Job completed"))]  # same Job: dropped
        + [(1.0, event("Completed", "Job completed", name="job-b"))]  # other Job: passes
        + [(1.0, event("Killing", "Stopping", component="kubelet"))],  # other source
    )
    assert [a for a, _ in out[-3:]] == ["drop", "create", "create"]


@pytest.mark.parametrize(
    ("n", "window_gap_s", "plain", "combined_actions"),
    [
        (9, 0.0, 9, []),  # under the threshold: every message is its own event
        (10, 0.0, 9, ["create"]),  # the 10th distinct message starts the combined event
        (14, 0.0, 9, ["create", "update", "update", "update", "update"]),
        (14, 601.0, 14, []),  # more than 10 minutes apart: never aggregated
    ],
)
def test_aggregation_of_similar_events(
    n: int, window_gap_s: float, plain: int, combined_actions: list[str]
) -> None:
    model = EventRecorderModel(RecorderSettings(burst=1000))
    events = [(i * window_gap_s, event(message=f"Created pod: p-{i}")) for i in range(n)]
    out = run(model, events)
    assert [a for a, m in out if not m.startswith(COMBINED_PREFIX)] == ["create"] * plain
    assert [a for a, m in out if m.startswith(COMBINED_PREFIX)] == combined_actions


def test_the_combined_event_keeps_its_name_and_counts_up() -> None:
    model = EventRecorderModel(RecorderSettings(burst=1000))
    results = [model.record(e, at(t + i)) for i, (t, e) in enumerate(creates(12))]
    first, last = results[9].event, results[11].event
    assert first is not None and last is not None
    assert first["metadata"]["name"] == last["metadata"]["name"]
    assert (first["count"], last["count"]) == (1, 3)
    assert last["message"] == COMBINED_PREFIX + "Created pod: p-11"
    assert last["firstTimestamp"] == first["firstTimestamp"] != last["lastTimestamp"]


def test_an_identical_repeat_updates_the_stored_event() -> None:
    model = EventRecorderModel()
    a = model.record(event("BackOff", "Back-off restarting"), at(0)).event
    b = model.record(event("BackOff", "Back-off restarting"), at(5)).event
    assert a is not None and b is not None
    assert (a["count"], b["count"]) == (1, 2)
    assert b["metadata"]["name"] == a["metadata"]["name"]
    assert b["lastTimestamp"] == "2026-11-30T12:00:05Z"


def test_a_dropped_repeat_still_counts_in_the_next_update() -> None:
    model = EventRecorderModel(RecorderSettings(burst=1, refill_s=300.0))
    run(model, [(0.0, event("BackOff", "x")), (1.0, event("BackOff", "x"))])
    later = model.record(event("BackOff", "x"), at(301.0))
    assert later.action == "update" and later.event is not None
    assert later.event["count"] == 3
