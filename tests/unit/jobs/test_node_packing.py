"""shared.jobs.node_packing and its use in shared.jobs.autopilot.layer_requests: requests grown
to fill the node rung they force, worked examples (the predecessor's own test values)."""

from __future__ import annotations

import pytest

from shared.config.config import JobSettings
from shared.jobs.autopilot import layer_requests
from shared.jobs.node_packing import (
    NODE_SIZES,
    Packed,
    allocatable_cpu,
    fill_node,
    forced_node,
    reserved_cpu,
)


@pytest.mark.parametrize(
    ("node", "allocatable"),
    # measured by the predecessor: e2-standard-4 3920m, ek-standard-8 7910m, e2-standard-32
    # 31850m; 1 and 60 worked by hand (0.06; 0.06 + 0.01 + 0.01 + 56 x 0.0025 = 0.22)
    [(1, 0.94), (2, 1.93), (4, 3.92), (8, 7.91), (16, 15.89), (32, 31.85), (60, 59.78)],
)
def test_allocatable_follows_gke_reservation(node, allocatable):
    assert round(allocatable_cpu(node), 4) == allocatable
    assert round(reserved_cpu(node) + allocatable, 9) == node


@pytest.mark.parametrize(
    ("cpu", "memory", "max_cpu", "expected"),
    [
        # 16 vCPU does not fit a 16 (15.89 allocatable): a 32 is forced; 31.85 - 1 -> 30.75,
        # memory x 30.75/16 keeps 2 GiB per vCPU
        (16, 32, None, Packed(30.75, 61.5, 32)),
        (4, 8, None, Packed(6.75, 13.5, 8)),  # forces an 8: 7.91 - 1 -> 6.75
        (2, 4, None, Packed(2.75, 5.5, 4)),  # forces a 4: 3.92 - 1 -> 2.75
        (8, 16, 30.0, Packed(14.75, 29.5, 16)),  # the cap is above: unaffected
        (16, 32, 30.0, Packed(30.0, 60.0, 32)),  # the general-purpose ceiling caps it
        (16, 32, 54.0, Packed(30.75, 61.5, 32)),  # Scale-Out's ceiling is above
        (40, 80, 54.0, Packed(46.75, 93.5, 48)),  # a 48: 47.84 - 1 -> 46.75, under 54
        (50, 100, 54.0, Packed(54.0, 108.0, 60)),  # 60: 58.78 usable, capped at 54
        (40, 80, 30.0, Packed(40, 80)),  # already over the ceiling: left for its error
        (2, 96, None, Packed(2, 96)),  # 48 GiB/vCPU: memory picks the machine
        (30, 110, None, Packed(30, 110)),  # 3.67 GiB/vCPU: just above the standard shape
        (4, 14, None, Packed(6.75, 23.625, 8)),  # exactly 3.5 GiB/vCPU: still packed
        (1, 2, None, Packed(1, 2)),  # forces a 2: 1.93 - 1 is below the ask
        (0.5, 1, None, Packed(0.5, 1)),  # a 1: 0.94 - 1 < 0
        (90, 180, None, Packed(90, 180)),  # above every rung
        (0, 2, None, Packed(0, 2)),  # no division by zero
    ],
)
def test_fill_node(cpu, memory, max_cpu, expected):
    assert fill_node(cpu, memory, max_cpu=max_cpu) == expected


@pytest.mark.parametrize("cpu", [0.5, 1, 2, 3, 4, 8, 12, 16, 24, 30, 40, 50])
def test_packing_never_leaves_the_forced_rung(cpu):
    """Every node that fits the grown request fitted the asked one: the set of shapes GKE may
    schedule the pod on is unchanged."""
    grown = fill_node(cpu, cpu * 2).cpu
    rung = forced_node(cpu)
    assert rung in NODE_SIZES
    assert cpu <= grown <= allocatable_cpu(rung)
    assert forced_node(grown) == rung


def _job(cpu: dict, memory: dict, **resources) -> JobSettings:
    """Packing on unless `pack=False` is given (this project's default is off)."""
    return JobSettings(resources={"cpu": cpu, "memory": memory, "pack": True, **resources})


@pytest.mark.parametrize(
    ("job", "layer", "expected"),
    [
        # the predecessor example's ingest curve (cpu 1 x 2^(L-2), max 16; memory 4 x 1.5^(L-2)):
        # L3 2/6 -> 2.75/8.25; L4 4/9 -> 6.75/15.1875, snapped up to 15.25; L6 16/20.25 -> the
        # general-purpose ceiling 30 / 37.97, snapped to 38
        (_job({"base": 1, "factor": 2, "max": 16}, {"base": 4, "factor": 1.5}), 3, (2.75, 8.25)),
        (_job({"base": 1, "factor": 2, "max": 16}, {"base": 4, "factor": 1.5}), 4, (6.75, 15.25)),
        (_job({"base": 1, "factor": 2, "max": 16}, {"base": 4, "factor": 1.5}), 6, (30, 38)),
        # a memory-only override at the layer: neither side grown
        (_job({"base": 16}, {"base": 32}, overrides={6: {"memory": 40}}), 6, (16, 40)),
        (_job({"base": 16}, {"base": 32}, overrides={6: {"memory": 40}}), 5, (30, 60)),
        (_job({"base": 16}, {"base": 32}, pack=False), 5, (16, 32)),
        # Scale-Out: its ceiling (54) caps the fill, its fixed 4 GiB/vCPU raises the memory
        (
            JobSettings(
                compute_class="Scale-Out",
                resources={"cpu": {"base": 50}, "memory": {"base": 100}, "pack": True},
            ),
            2,
            (54, 216),
        ),
        # the default (a new-shape file): not packed, the curves' request as asked
        (JobSettings(resources={"cpu": {"base": 16}, "memory": {"base": 32}}), 5, (16, 32)),
    ],
)
def test_layer_requests_pack_curves_only(job, layer, expected):
    req = layer_requests(job, layer)
    assert (req.cpu, req.memory_gib) == expected
