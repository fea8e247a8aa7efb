"""Autopilot request snapping: grid, minimums, ratio, ceilings, per-layer curves."""

from __future__ import annotations

import math

import pytest

from shared.config.config import Curve, JobSettings, LayerOverride, Resources
from shared.jobs.autopilot import (
    Requests,
    ResourceLimitError,
    layer_requests,
    limits_for,
    snap_requests,
)

SNAP_CASES = [
    # (cpu, memory GiB, class) -> (cpu_str, memory_str): why
    ((0.1, 0.1, ""), ("250m", "512Mi")),  # both minimums
    ((0.25, 0.5, ""), ("250m", "512Mi")),  # already valid
    ((0.3, 1.0, ""), ("500m", "1024Mi")),  # CPU rounds up to the next quarter
    ((0.75, 0.75, ""), ("750m", "768Mi")),  # 1:1 exactly
    ((1.0, 0.5, ""), ("1000m", "1024Mi")),  # memory raised to 1 GiB per vCPU
    ((0.25, 4.0, ""), ("750m", "4096Mi")),  # CPU raised: 4/6.5 = 0.615 -> 0.75
    ((0.5, 3.25, ""), ("500m", "3328Mi")),  # exactly 6.5 GiB per vCPU stays
    ((1.0, 1.1, ""), ("1000m", "1280Mi")),  # memory rounds up to 256 Mi
    ((0.75 + 1e-12, 1.0, ""), ("750m", "1024Mi")),  # float noise does not cost a step
    ((0.1 + 0.2, 1.0, ""), ("500m", "1024Mi")),
    ((1.0, 8.0, ""), ("1250m", "8192Mi")),  # 8/6.5 = 1.23 -> 1.25 (cheapest valid)
    ((16.0, 110.0, ""), ("17000m", "112640Mi")),  # 110/6.5 = 16.9 -> 17
    ((30.0, 110.0, ""), ("30000m", "112640Mi")),  # exactly at the ceiling
    ((1.0, 2.0, "general-purpose"), ("1000m", "2048Mi")),  # explicit default name
    ((1.0, 2.0, "General-Purpose"), ("1000m", "2048Mi")),
    ((1.0, 8.0, "Balanced"), ("1000m", "8192Mi")),  # Balanced allows 1:8
    ((1.0, 9.0, "Balanced"), ("1250m", "9216Mi")),
    ((2.0, 1.0, "Balanced"), ("2000m", "2048Mi")),
    ((40.0, 200.0, "Balanced"), ("40000m", "204800Mi")),  # past general-purpose, fine here
    ((1.0, 4.0, "Scale-Out"), ("1000m", "4096Mi")),  # Scale-Out is exactly 1:4
    ((1.0, 1.0, "Scale-Out"), ("1000m", "4096Mi")),
    ((1.0, 5.0, "Scale-Out"), ("1250m", "5120Mi")),
    ((1.0, 100.0, "Performance"), ("1000m", "102400Mi")),  # node-based: no ratio, no ceiling
    ((0.1, 0.1, "my-custom-class"), ("250m", "512Mi")),  # unknown: grid and minimums only
]


@pytest.mark.parametrize(("args", "expected"), SNAP_CASES)
def test_snap_requests(args, expected):
    req = snap_requests(*args)
    assert (req.cpu_str, req.memory_str) == expected
    assert req.millicores % 250 == 0 and req.memory_mib % 256 == 0


@pytest.mark.parametrize(("args", "expected"), SNAP_CASES)
def test_snap_never_lowers_and_is_idempotent(args, expected):
    cpu, mem, cls = args
    req = snap_requests(cpu, mem, cls)
    assert req.cpu >= cpu - 1e-9 and req.memory_gib >= mem - 1e-9
    assert snap_requests(req.cpu, req.memory_gib, cls) == req


@pytest.mark.parametrize(("args", "expected"), SNAP_CASES)
def test_snap_respects_the_class_ratio(args, expected):
    _, _, cls = args
    req = snap_requests(*args)
    limits = limits_for(cls)
    ratio = req.memory_gib / req.cpu
    if limits.min_ratio is not None:
        assert ratio >= limits.min_ratio - 1e-9
    if limits.max_ratio is not None:
        assert ratio <= limits.max_ratio + 1e-9


@pytest.mark.parametrize(
    ("cpu", "mem", "cls"),
    [
        (31.0, 31.0, ""),  # CPU past 30
        (30.25, 40.0, "general-purpose"),
        (1.0, 111.0, ""),  # memory past 110 (CPU would be raised to 17.25 as well)
        (223.0, 223.0, "Balanced"),
        (1.0, 900.0, "Balanced"),
        (55.0, 220.0, "Scale-Out"),
    ],
)
def test_ceiling_refused_naming_the_fix(cpu, mem, cls):
    with pytest.raises(ResourceLimitError) as exc:
        snap_requests(cpu, mem, cls)
    assert "job.compute_class" in str(exc.value)
    assert "job.resources.overrides" in str(exc.value)
    assert isinstance(exc.value, ValueError)


@pytest.mark.parametrize(
    ("cpu", "mem"), [(0, 1), (1, 0), (-1, 1), (math.inf, 1), (1, math.nan), (math.nan, 1)]
)
def test_bad_inputs(cpu, mem):
    with pytest.raises(ValueError):
        snap_requests(cpu, mem)


def test_requests_strings():
    req = Requests(cpu=0.75, memory_gib=1.5)
    assert (req.cpu_str, req.memory_str) == ("750m", "1536Mi")


CURVED = JobSettings(
    resources=Resources(
        cpu=Curve(base=0.5, factor=2.0),
        memory=Curve(base=1.0, factor=2.0, max=8.0),
        overrides={4: LayerOverride(memory=12.0), 6: LayerOverride(cpu=3.0, memory=3.0)},
        pack=False,  # the curves and the grid alone (packing: test_node_packing.py)
    )
)


@pytest.mark.parametrize(
    ("job", "layer", "expected"),
    [
        (JobSettings(), 2, ("500m", "1024Mi")),  # the config defaults
        (JobSettings(), 9, ("500m", "1024Mi")),  # flat curves stay flat
        (CURVED, 2, ("500m", "1024Mi")),
        (CURVED, 3, ("1000m", "2048Mi")),  # base * factor^(L-2)
        (CURVED, 4, ("2000m", "12288Mi")),  # memory override wins over the curve
        (CURVED, 5, ("4000m", "8192Mi")),  # memory capped at max
        (CURVED, 6, ("3000m", "3072Mi")),  # both overridden
        (
            JobSettings(resources=Resources(cpu=Curve(base=1.0, add=0.5))),
            3,
            ("1500m", "1536Mi"),  # + add; memory raised to 1:1
        ),
        (
            JobSettings(
                compute_class="Scale-Out", resources=Resources(memory=Curve(base=2.0, factor=2))
            ),
            3,
            ("1000m", "4096Mi"),  # class rules applied to the curve value
        ),
    ],
)
def test_layer_requests(job, layer, expected):
    req = layer_requests(job, layer)
    assert (req.cpu_str, req.memory_str) == expected


def test_layer_requests_ceiling_names_the_layer():
    job = JobSettings(resources=Resources(cpu=Curve(base=1.0, factor=2.0), pack=False))
    assert layer_requests(job, 6).cpu == 16.0
    with pytest.raises(ResourceLimitError, match=r"layer 7: .*job\.resources\.overrides"):
        layer_requests(job, 7)  # 32 vCPU


def test_override_rescues_a_layer_past_the_ceiling():
    job = JobSettings(
        resources=Resources(cpu=Curve(base=1.0, factor=2.0), overrides={7: LayerOverride(cpu=24.0)})
    )
    assert layer_requests(job, 7).cpu_str == "24000m"
