"""The one parallelism target the controller, `pipeline status` and the run report share,
and the helpers that name a layer's neighbours and a stage's dependencies once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config.config import Ramp
from shared.model.stages import dependencies_in
from shared.model.state import RunState, build_layers
from shared.reconcile.parallelism import parallelism_target

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RAMP = Ramp(start=2, factor=2, period=60, max=16)


@pytest.mark.parametrize(
    ("completions", "minutes", "override", "current", "want"),
    [
        (100, 0, None, 0, 2),  # the ramp's start
        (100, 2, None, 0, 8),  # two doublings
        (100, 60, None, 0, 16),  # capped at ramp.max
        (5, 60, None, 0, 5),  # never more than the Job's completions
        (100, 0, None, 12, 12),  # the ramp never lowers a running Job
        (100, 0, None, 40, 16),  # ... unless ramp.max was lowered below it
        (100, 0, 30, 0, 30),  # an operator's `scale` wins over the ramp
        (100, 0, 30, 50, 30),  # ... and may lower it
        (10, 0, 30, 0, 10),  # ... up to the completions
    ],
)
def test_parallelism_target(
    completions: int, minutes: int, override: int | None, current: int, want: int
) -> None:
    now = T0 + timedelta(minutes=minutes)
    got = parallelism_target(RAMP, completions, T0, now, override=override, current=current)
    assert got == want


@pytest.mark.parametrize(
    ("stage", "built", "want"),
    [
        ("ingest", ["ingest", "l2cache"], []),
        ("l2cache", ["ingest", "l2cache"], ["ingest"]),
        ("l2cache", ["l2cache"], []),  # a stage the run does not build is not waited for
    ],
)
def test_dependencies_in(stage: str, built: list[str], want: list[str]) -> None:
    assert dependencies_in(stage, built) == want


def test_layer_below_and_top_layer() -> None:
    run = RunState("r", "g", ["ingest"], {"ingest": 4})
    run.layers = build_layers(run.stages, run.top_layers)
    assert run.layer_below(run.layers["ingest-L3"]) is run.layers["ingest-L2"]
    assert run.layer_below(run.layers["ingest-L2"]) is None
    assert run.top_layer("ingest") is run.layers["ingest-L4"]
