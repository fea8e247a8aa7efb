"""shared.jobs.worker_pod: process count, resources block and scheduling of a worker pod."""

from __future__ import annotations

import pytest

from shared.config.config import JobSettings
from shared.jobs.autopilot import Requests
from shared.jobs.worker_pod import (
    SchedulingError,
    layer_processes,
    resources_block,
    scheduling,
)


@pytest.mark.parametrize(
    ("job", "cpu", "expected"),
    [
        # processes_per_vcpu x the whole billed vCPU (the predecessor's newest rule), >= 1
        ({}, 0.25, 1),  # 0 whole vCPU: never 0 processes
        ({}, 1.75, 1),  # the default, 1 per vCPU (a predecessor-shaped file gets 2)
        ({}, 30, 30),
        ({"processes_per_vcpu": 2}, 1.75, 2),  # 2 per vCPU x 1 whole vCPU
        ({"processes_per_vcpu": 2}, 2.75, 4),  # not floor(2 x 2.75) = 5: whole vCPUs
        ({"processes_per_vcpu": 2}, 30, 60),
        ({"processes_per_vcpu": 1}, 30, 30),
        ({"processes_per_vcpu": 0}, 8, 8),  # 0 reads as 1, as in the predecessor
        ({"processes_per_vcpu": 3}, 2.9999999999, 9),  # float noise keeps the vCPU
        ({"parallel": False, "processes_per_vcpu": 8}, 16, 1),
    ],
)
def test_layer_processes(job, cpu, expected):
    assert layer_processes(JobSettings(**job), Requests(cpu=cpu, memory_gib=4)) == expected


@pytest.mark.parametrize("value", [1.5, "two", -1])
def test_processes_per_vcpu_is_a_whole_number(value):
    """The images parse PCG_N_PROCESSES as an int: 1.5 would ship "21.0" (the predecessor's
    reason for refusing it), so the model refuses it naming the field."""
    with pytest.raises(ValueError, match="processes_per_vcpu"):
        JobSettings(processes_per_vcpu=value)


@pytest.mark.parametrize(
    ("burst", "expected"),
    [
        (True, {"requests": {"cpu": "1500m", "memory": "2048Mi"}}),
        (
            False,
            {
                "requests": {"cpu": "1500m", "memory": "2048Mi"},
                "limits": {"cpu": "1500m", "memory": "2048Mi"},
            },
        ),
    ],
)
def test_resources_block(burst, expected):
    block = resources_block(JobSettings(burst=burst), Requests(cpu=1.5, memory_gib=2))
    assert block == expected


@pytest.mark.parametrize(
    ("job", "zone", "selector", "spot"),
    [
        ({}, "", {"cloud.google.com/gke-spot": "true"}, True),
        ({"spot": False}, "", {}, False),
        (
            {"compute_class": "Balanced"},
            "z-1",
            {
                "cloud.google.com/gke-spot": "true",
                "cloud.google.com/compute-class": "Balanced",
                "topology.kubernetes.io/zone": "z-1",
            },
            True,
        ),
        (
            {"compute_class": "Scale-Out"},
            "",
            {"cloud.google.com/gke-spot": "true", "cloud.google.com/compute-class": "Scale-Out"},
            True,
        ),
        (
            {"compute_class": "Scale-Out", "spot": False},
            "",
            {"cloud.google.com/compute-class": "Scale-Out"},
            False,
        ),
        ({"compute_class": "general-purpose"}, "", {"cloud.google.com/gke-spot": "true"}, True),
    ],
)
def test_scheduling(job, zone, selector, spot):
    got_selector, tolerations = scheduling(JobSettings(**job), zone)
    assert got_selector == selector
    assert bool(tolerations) is spot


@pytest.mark.parametrize(
    ("job", "zone", "match"),
    [({}, "us east", "zone")],
)
def test_scheduling_refusals_name_the_field(job, zone, match):
    with pytest.raises(SchedulingError, match=match):
        scheduling(JobSettings(**job), zone)
