"""shared.jobs.worker_pod: process count, resources block and scheduling of a worker pod."""

from __future__ import annotations

import pytest

from shared.config.config import JobSettings
from shared.jobs.autopilot import Requests
from shared.jobs.worker_pod import (
    SchedulingError,
    is_custom_class,
    layer_processes,
    resources_block,
    scheduling,
)


@pytest.mark.parametrize(
    ("job", "cpu", "expected"),
    [
        ({}, 0.25, 1),
        ({}, 1.75, 1),  # whole vCPUs the pod owns
        ({}, 30, 30),
        ({"processes_per_vcpu": 2}, 0.5, 1),
        ({"processes_per_vcpu": 2}, 2.75, 5),
        ({"processes_per_vcpu": 1.15}, 20, 23),  # 22.999999999999996 in floats
        ({"processes_per_vcpu": 0.5}, 0.25, 1),  # never 0
        ({"parallel": False, "processes_per_vcpu": 8}, 16, 1),
    ],
)
def test_layer_processes(job, cpu, expected):
    assert layer_processes(JobSettings(**job), Requests(cpu=cpu, memory_gib=4)) == expected


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
    ("name", "custom"),
    [
        ("", False),
        ("general-purpose", False),
        ("Balanced", False),
        ("scale-out", False),
        ("Performance", False),
        ("Accelerator", False),
        ("autopilot", True),
        ("autopilot-spot", True),
        ("my-n4-class", True),
    ],
)
def test_is_custom_class(name, custom):
    assert is_custom_class(name) is custom


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
        ({"compute_class": "mine"}, "", {"cloud.google.com/compute-class": "mine"}, False),
        (
            {"compute_class": "mine", "spot": False},
            "",
            {"cloud.google.com/compute-class": "mine"},
            False,
        ),
    ],
)
def test_scheduling(job, zone, selector, spot):
    got_selector, tolerations = scheduling(JobSettings(**job), zone)
    assert got_selector == selector
    assert bool(tolerations) is spot


@pytest.mark.parametrize(
    ("job", "zone", "match"),
    [({"compute_class": "no way"}, "", "job.compute_class"), ({}, "us east", "zone")],
)
def test_scheduling_refusals_name_the_field(job, zone, match):
    with pytest.raises(SchedulingError, match=match):
        scheduling(JobSettings(**job), zone)
