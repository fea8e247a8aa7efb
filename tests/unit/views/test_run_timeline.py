"""shared.views.run_timeline: outcomes, attempts, the running-pods step function, the ramp's
allowance and chunks over time (table-driven)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config.config import Ramp
from shared.model.state import RunState, build_layers
from shared.views.progress import LayerSize
from shared.views.run_timeline import (
    Attempt,
    attempts,
    batch_chunk_count,
    chunks_over_time,
    outcome,
    ramp_allowed,
    running_pods,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


@pytest.mark.parametrize(
    "record, expected",
    [
        ({"phase": "Succeeded", "reason": "Completed"}, "succeeded"),
        ({"phase": "Failed", "reason": "DisruptionTarget"}, "preempted"),
        ({"phase": "Failed", "reason": "OOMKilled"}, "oom"),
        ({"phase": "Failed", "reason": "Error"}, "failed"),
        ({"phase": "Running"}, "running"),
    ],
)
def test_outcome(record, expected):
    assert outcome(record) == expected


def test_attempts_skip_unstarted_pods_and_end_running_ones_now():
    records = {
        "ingest-L2": [
            {"index": 1, "name": "b", "phase": "Running", "started": at(5)},
            {"index": 0, "name": "a", "phase": "Succeeded", "started": "2026-01-01T00:00:01Z",
             "finished": at(3), "exit_code": 0},
            {"index": 2, "name": "c", "phase": "Pending"},
            # ended with its lost node, no end time written: a point, not running until now
            {"index": 3, "name": "d", "phase": "Failed", "reason": "DisruptionTarget",
             "started": at(6)},
        ]
    }  # fmt: skip
    items = attempts(records, now=at(10))
    assert [(a.pod, a.start, a.end, a.outcome) for a in items] == [
        ("a", at(1), at(3), "succeeded"),
        ("b", at(5), at(10), "running"),
        ("d", at(6), at(6), "preempted"),
    ]


def _a(start: float, end: float, index: int = 0, result: str = "succeeded") -> Attempt:
    return Attempt("ingest-L2", index, f"p{index}", at(start), at(end), result)


def test_running_pods_is_a_step_function():
    steps = running_pods([_a(0, 10), _a(5, 15, 1), _a(10, 12, 2)])
    assert steps == [(at(0), 1), (at(5), 2), (at(10), 2), (at(12), 1), (at(15), 0)]


def test_ramp_allowed_sums_running_layers_and_honours_overrides():
    run = RunState(
        "r", "g", ["ingest"], {"ingest": 3}, layers=build_layers(["ingest"], {"ingest": 3})
    )
    l2, l3 = run.layers["ingest-L2"], run.layers["ingest-L3"]
    l2.timing.ramp_started_at, l2.timing.finished_at = at(0), at(100)
    l3.timing.ramp_started_at, l3.job.scale_override = at(50), 7
    ramps = {"ingest": Ramp(start=2, factor=2, period=10, max=100)}
    allowed = ramp_allowed(
        run, ramps, {"ingest-L2": 50, "ingest-L3": 50}, [at(0), at(25), at(60)], at(200)
    )
    assert allowed == [
        (at(0), 2),
        (at(25), 8),
        (at(60), 50 + 7),
    ]  # 2 * 2^6 capped at 50 completions


@pytest.mark.parametrize("index, expected", [(0, 4), (1, 4), (2, 2), (3, 0)])
def test_batch_chunk_count(index, expected):
    assert batch_chunk_count(index, LayerSize(10, 4)) == expected


def test_chunks_over_time_count_each_index_once_at_its_first_success():
    items = [_a(0, 5, 0), _a(0, 3, 1, "failed"), _a(4, 8, 1), _a(9, 12, 1), _a(1, 9, 2)]
    series = chunks_over_time(items, {"ingest-L2": LayerSize(10, 4)})
    assert series == {"ingest-L2": [(at(5), 4), (at(8), 8), (at(9), 10)]}


def test_attempt_times_are_plain_datetimes():
    class Stamp(datetime):  # as Firestore's DatetimeWithNanoseconds
        pass

    start = Stamp(2026, 1, 1, tzinfo=UTC)
    records = {
        "ingest-L2": [{"index": 0, "phase": "Succeeded", "started": start, "finished": start}]
    }
    (item,) = attempts(records, now=at(1))
    assert type(item.start) is datetime and type(item.end) is datetime and item.start == T0


def test_ramp_allowed_counts_a_layer_from_its_submission_when_the_gate_moved_its_ramp():
    # A busy Bigtable re-anchored the ramp at 40 s (the last anchor is all the run keeps): the
    # layer ran from 0 s all the same, so the line must not drop to 0 while its pods run.
    run = RunState(
        "r", "g", ["ingest"], {"ingest": 2}, layers=build_layers(["ingest"], {"ingest": 2})
    )
    l2 = run.layers["ingest-L2"]
    l2.timing.submitted_at, l2.timing.ramp_started_at, l2.timing.finished_at = at(0), at(40), at(90)
    ramps = {"ingest": Ramp(start=2, factor=2, period=10, max=4)}
    times = [at(0), at(15), at(39), at(40), at(55), at(95)]
    allowed = ramp_allowed(run, ramps, {"ingest-L2": 50}, times, at(200))
    assert allowed == [
        (at(0), 2),
        (at(15), 4),  # the ramp from the submission
        (at(39), 4),
        (at(40), 2),  # re-anchored: its start again
        (at(55), 4),
        (at(95), 0),  # finished
    ]
