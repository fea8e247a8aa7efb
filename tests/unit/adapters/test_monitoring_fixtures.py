"""The Cloud Monitoring adapter against `timeSeries.list` responses written by hand in the
published shape (tests/fixtures/monitoring/, validated against the monitoring v3 discovery
document by tests/unit/test_fixture_shapes.py: newest point first, int64 as strings, paged):
the load is the busiest cluster's latest point, the bill's series are summed and paged
through, a refusal names the role to grant, and an answer carrying `executionErrors` or
`unreachable` is partial (PartialAnswer with what it held, never cached)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.google.monitoring import (
    CPU_LOAD,
    NODE_COUNT,
    TABLE_BYTES,
    CloudMonitoring,
    MonitoringError,
    partial_reason,
)
from adapters.google.pod_usage import CPU_USAGE, MEMORY_USED, CloudPodUsage
from shared.ports.cluster import PodInfo
from shared.ports.partial_answer import PartialAnswer
from shared.ports.pod_usage import PodLifeUsage
from tests.builders.fixture_http import MonitoringSession

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "monitoring"
NOW = datetime(2026, 12, 1, 22, 4, tzinfo=UTC)


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def monitoring() -> tuple[CloudMonitoring, MonitoringSession]:
    table = {
        (CPU_LOAD, ""): (200, "cpu_load"),
        (TABLE_BYTES, ""): (200, "table_bytes_page1"),
        (TABLE_BYTES, "CgwIoK3ruQYQgLCBiQM"): (200, "table_bytes_page2"),
        (NODE_COUNT, ""): (200, "node_count"),
    }
    session = MonitoringSession(table)
    return CloudMonitoring(session, clock=lambda: NOW), session


def test_load_is_the_busiest_clusters_latest_point():
    mon, session = monitoring()
    # pcg-c1's latest is 0.78; pcg-c2 peaked at 0.9 a minute earlier but is 0.31 now
    assert mon.cpu_load("my-project", "pcg") == pytest.approx(0.7830519676208496)
    query = session.queries[0]
    assert query["filter"] == [f'metric.type="{CPU_LOAD}" AND resource.labels.instance="pcg"']
    assert query["interval.startTime"] == ["2026-12-01T21:59:00Z"]
    assert query["interval.endTime"] == ["2026-12-01T22:04:00Z"]


def test_load_is_cached_for_the_reconciles_of_half_a_tick():
    mon, session = monitoring()
    mon.cpu_load("my-project", "pcg")
    mon.cpu_load("my-project", "pcg")
    assert len(session.queries) == 1


def test_no_points_is_an_unknown_load():
    mon, session = monitoring()
    session.answers[(CPU_LOAD, "")] = (200, "empty")
    assert mon.cpu_load("my-project", "pcg") is None


def test_table_bytes_are_paged_through_oldest_first():
    mon, session = monitoring()
    got = mon.table_bytes("my-project", "pcg", "graph-1", NOW.replace(hour=12), NOW)
    assert [s.value / 2**30 for s in got] == [20.0, 40.0, 60.0]
    assert [s.at.minute for s in got] == [0, 5, 10]
    assert session.queries[0]["aggregation.crossSeriesReducer"] == ["REDUCE_SUM"]
    assert 'resource.labels.table="graph-1"' in session.queries[0]["filter"][0]
    assert session.queries[1]["pageToken"] == ["CgwIoK3ruQYQgLCBiQM"]


def test_node_counts_start_an_hour_before_the_build():
    mon, session = monitoring()
    got = mon.node_counts("my-project", "pcg", NOW.replace(hour=12, minute=0), NOW)
    assert [s.value for s in got] == [3, 3, 5, 3]
    assert session.queries[0]["interval.startTime"] == ["2026-12-01T11:00:00Z"]


def test_a_refusal_names_the_role():
    mon, session = monitoring()
    session.answers[(CPU_LOAD, "")] = (403, "denied")
    with pytest.raises(MonitoringError, match="roles/monitoring.viewer"):
        mon.cpu_load("my-project", "pcg")


def test_a_partial_load_is_a_lower_bound_and_read_again():
    mon, session = monitoring()
    session.answers[(CPU_LOAD, "")] = (200, "cpu_load_partial")
    with pytest.raises(PartialAnswer, match="us-east1-b could not be read") as partial:
        mon.cpu_load("my-project", "pcg")
    # pcg-c1 is missing from the answer: pcg-c2's 0.31 is what it holds, not the load
    assert partial.value.value == pytest.approx(0.31)
    assert partial.value.reason.startswith("executionErrors: ")
    session.answers[(CPU_LOAD, "")] = (200, "cpu_load")
    assert mon.cpu_load("my-project", "pcg") == pytest.approx(0.7830519676208496)
    assert len(session.queries) == 2  # the partial answer was not cached


def test_partial_table_bytes_carry_the_sums_they_hold_and_why():
    mon, session = monitoring()
    session.answers[(TABLE_BYTES, "")] = (200, "table_bytes_partial")
    with pytest.raises(PartialAnswer) as partial:
        mon.table_bytes("my-project", "pcg", "graph-1", NOW.replace(hour=12), NOW)
    assert [s.value / 2**30 for s in partial.value.value] == [20.0]
    assert partial.value.reason == (
        "executionErrors: The query timed out before every series was read.; unreachable: us-east1"
    )


def test_a_complete_answer_has_no_partial_reason():
    assert partial_reason([fixture("cpu_load"), fixture("empty")]) == ""
    assert partial_reason([fixture("empty"), fixture("container_memory_partial")]) == (
        "unreachable: us-east1"
    )


# -- GKE pods' lifetime usage (adapters.google.pod_usage) -----------------------------


def pod(name: str, created_minute: int) -> PodInfo:
    at = datetime(2026, 12, 1, 22, created_minute, tzinfo=UTC)
    return PodInfo(name, f"uid-{name}", "run1-main-l2", 0, "Succeeded", 0.5, 1.0, at, at)


def pod_usage() -> tuple[CloudPodUsage, MonitoringSession]:
    table = {(MEMORY_USED, ""): (200, "container_memory"), (CPU_USAGE, ""): (200, "container_cpu")}
    session = MonitoringSession(table)
    return CloudPodUsage("my-project", "pcg", session, clock=lambda: NOW), session


def test_pod_usage_is_each_pods_peak_memory_and_mean_cpu():
    reader, session = pod_usage()
    pods = [
        pod("run1-main-l2-0-x7k2p", 0),
        pod("run1-main-l2-1-q9v4d", 1),
        pod("run1-main-l2-2-zz", 2),
    ]
    got = reader.life_usage("run1-main-l2", pods)
    # pod 0: peak of 0.5, 1.5, 1 GiB; 112.5 CPU seconds over the 150 s its newest point spans
    assert got["run1-main-l2-0-x7k2p"] == PodLifeUsage(1.5, pytest.approx(0.75))
    # pod 1 lived under a minute: one point each, its CPU point spanning the 40 s since its
    # container started (a CUMULATIVE point always spans time: start < end)
    assert got["run1-main-l2-1-q9v4d"] == PodLifeUsage(0.75, pytest.approx(0.3))
    # pod 2 has no point at all; the canary's pod matches the prefix but is not asked for
    assert set(got) == {"run1-main-l2-0-x7k2p", "run1-main-l2-1-q9v4d"}
    memory_filter = session.queries[0]["filter"][0]
    assert 'resource.labels.pod_name=starts_with("run1-main-l2-")' in memory_filter
    assert 'resource.labels.namespace_name="pcg"' in memory_filter
    assert 'metric.labels.memory_type="non-evictable"' in memory_filter
    assert "memory_type" not in session.queries[1]["filter"][0]
    assert session.queries[0]["interval.startTime"] == ["2026-12-01T21:59:00Z"]


def test_pod_usage_is_read_once_per_pod_set():
    reader, session = pod_usage()
    pods = [pod("run1-main-l2-0-x7k2p", 0)]
    reader.life_usage("run1-main-l2", pods)
    reader.life_usage("run1-main-l2", pods)
    assert len(session.queries) == 2  # memory and CPU, once


def test_partial_pod_usage_carries_what_it_read_and_is_not_remembered():
    reader, session = pod_usage()
    session.answers[(MEMORY_USED, "")] = (200, "container_memory_partial")
    pods = [pod("run1-main-l2-0-x7k2p", 0), pod("run1-main-l2-1-q9v4d", 1)]
    with pytest.raises(PartialAnswer, match="memory: unreachable: us-east1") as partial:
        reader.life_usage("run1-main-l2", pods)
    # pod 0's memory is one point of three (a lower bound); pod 1's memory is missing
    assert partial.value.value["run1-main-l2-0-x7k2p"] == PodLifeUsage(1.0, pytest.approx(0.75))
    assert partial.value.value["run1-main-l2-1-q9v4d"] == PodLifeUsage(None, pytest.approx(0.3))
    session.answers[(MEMORY_USED, "")] = (200, "container_memory")
    assert reader.life_usage("run1-main-l2", pods)["run1-main-l2-0-x7k2p"].peak_memory_gib == 1.5
    assert len(session.queries) == 4  # read again: memory and CPU twice


def test_pod_usage_refusal_names_the_role():
    reader, session = pod_usage()
    session.answers[(MEMORY_USED, "")] = (403, "denied")
    with pytest.raises(MonitoringError, match="roles/monitoring.viewer"):
        reader.life_usage("run1-main-l2", [pod("run1-main-l2-0-x7k2p", 0)])


def test_the_cloud_wiring_reads_gke_pods_usage_from_monitoring_only():
    from kubernetes.client import ApiClient

    from adapters.gke.cluster import GkeCluster
    from adapters.wiring import _pod_usage_for

    reader = _pod_usage_for("my-project", GkeCluster(ApiClient(), "pcg"))
    assert isinstance(reader, CloudPodUsage)
    assert (reader.project, reader.namespace) == ("my-project", "pcg")
    assert _pod_usage_for("my-project", object()) is None  # e.g. the local cluster: /proc
