"""shared.views.build_timeline: each layer's named spans from its run record and pod records,
and the run's wall time as the sum of named parts plus the unnamed rest (table-driven)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.model.state import RunState, build_layers
from shared.views.build_timeline import build_timeline
from shared.views.wall_parts import UNNAMED, Part

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def pod(created, started, finished, phase="Succeeded"):
    return {"created": at(created), "started": at(started), "finished": at(finished),
            "phase": phase}  # fmt: skip


def two_layer_run(advance: str = "auto") -> RunState:
    """L2 ready at 0 (no setup), L3 after it; finished at 40."""
    run = RunState(
        "r", "g", ["ingest"], {"ingest": 3}, advance=advance,
        created_at=at(0), finished_at=at(40), status="succeeded",
        layers=build_layers(["ingest"], {"ingest": 3}),
    )  # fmt: skip
    l2, l3 = run.layers["ingest-L2"], run.layers["ingest-L3"]
    l2.timing.submitted_at, l2.timing.finished_at = at(1), at(20)
    l3.timing.submitted_at, l3.timing.finished_at = at(23), at(39)
    return run


RECORDS = {
    # two pods of one wave: running at 3 and 4, done at 12 and 18; the Job complete at 20
    "ingest-L2": [pod(2, 3, 12), pod(2, 4, 18)],
    # a failed attempt then its retry: first running at 26, the last done at 38
    "ingest-L3": [pod(24, 26, 28, "Failed"), pod(29, 30, 38)],
}

CASES = [
    (
        "auto advance",
        "auto",
        None,
        {
            "ingest-L2": {"advance": 1, "startup": 2, "compute": 9, "tail": 6, "completion": 2},
            # tail from the later of the first done (28, a failure is not done) and the last
            # start (30): the first success is at 38
            "ingest-L3": {"advance": 3, "startup": 3, "compute": 12, "tail": 0, "completion": 1},
        },
        {"advance": 4, "startup": 5, "compute": 21, "tail": 6, "completion": 3, UNNAMED: 1},
    ),
    (
        "an approval 2 s after L2 finished",
        "approve",
        at(22),
        {
            "ingest-L2": {"advance": 1, "startup": 2, "compute": 9, "tail": 6, "completion": 2},
            "ingest-L3": {
                "approval_wait": 2,
                "advance": 1,
                "startup": 3,
                "compute": 12,
                "completion": 1,
            },  # fmt: skip
        },
        {
            "approval_wait": 2,
            "advance": 2,
            "startup": 5,
            "compute": 21,
            "tail": 6,
            "completion": 3,
            UNNAMED: 1,
        },  # fmt: skip
    ),
]


# The first pod's process start-up, as its worker reported it (Timing.process_start_s): cut
# from the compute span's start, never past it.
PROCESS_CASES = [
    (
        "process start-ups of 1.5 s (L2) and 20 s (L3: more than its compute)",
        {"ingest-L2": 1.5, "ingest-L3": 20.0},
        {
            "ingest-L2": {
                "advance": 1,
                "startup": 2,
                "process_start": 1.5,
                "compute": 7.5,
                "tail": 6,
                "completion": 2,
            },  # fmt: skip
            "ingest-L3": {"advance": 3, "startup": 3, "process_start": 12, "completion": 1},
        },
        {
            "advance": 4,
            "startup": 5,
            "process_start": 13.5,
            "compute": 7.5,
            "tail": 6,
            "completion": 3,
            UNNAMED: 1,
        },  # fmt: skip
    ),
]


@pytest.mark.parametrize(
    ("name", "advance", "approved_at", "layers", "parts"),
    [*CASES, *((name, "auto", None, lay, parts) for name, _, lay, parts in PROCESS_CASES)],
    ids=[c[0] for c in CASES] + [c[0] for c in PROCESS_CASES],
)
def test_each_layers_spans_and_the_runs_parts(name, advance, approved_at, layers, parts):
    run = two_layer_run(advance)
    for case, start_ups, _, _ in PROCESS_CASES:
        if case == name:
            for key, seconds in start_ups.items():
                run.layers[key].timing.process_start_s = seconds
    run.layers["ingest-L3"].approval.at = approved_at
    if approved_at is not None:
        run.layers["ingest-L2"].approval.at = at(0)
    tl = build_timeline(run, RECORDS, now=at(100))
    got = {lt.key: {p.value: lt.seconds(p) for p in Part if lt.seconds(p)} for lt in tl.layers}
    reported = {lt.key: lt.process_start_s for lt in tl.layers}
    assert reported == {k: run.layers[k].timing.process_start_s for k in reported}
    assert got == {k: {p: float(s) for p, s in v.items() if s} for k, v in layers.items()}
    assert {k: v for k, v in tl.parts.items() if v} == pytest.approx(parts)
    # wall time is the sum of the named parts and the unnamed rest
    assert sum(tl.parts.values()) == pytest.approx(tl.wall_s) == 40.0


def test_a_running_run_is_measured_to_now_and_layers_not_started_are_left_out():
    run = two_layer_run()
    run.finished_at, run.status = None, "running"
    l3 = run.layers["ingest-L3"]
    l3.timing.submitted_at = l3.timing.finished_at = None
    tl = build_timeline(run, {"ingest-L2": RECORDS["ingest-L2"]}, now=at(30))
    assert [lt.key for lt in tl.layers] == ["ingest-L2"]
    assert tl.wall_s == 30.0 and tl.parts[UNNAMED] == pytest.approx(10.0)


def test_a_setup_pass_and_the_pods_startup_median():
    run = two_layer_run()
    run.setups = {}
    from shared.model.state import SetupState

    run.setups["ingest"] = SetupState("ingest", "succeeded", 1, "s", at(0.5), at(1))
    tl = build_timeline(run, RECORDS, now=at(100))
    assert tl.layers[0].key == "ingest-setup" and tl.layers[0].seconds(Part.SETUP) == 0.5
    assert tl.layers[0].seconds(Part.ADVANCE) == 0.5  # the run created -> its Job created
    assert tl.layers[1].pod_startup_median_s == 1.5  # (1 + 2) / 2
    out = tl.to_json()
    assert out["parts_s"]["setup"] == 0.5 and out["layers"][1]["startup"] == 2.0
