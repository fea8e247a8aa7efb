"""The Cloud Monitoring adapter against recorded `timeSeries.list` responses
(tests/fixtures/monitoring/: Google's JSON shapes, newest point first, int64 as strings,
paged): the load is the busiest cluster's latest point, the bill's series are summed and
paged through, a refusal names the role to grant."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from shared.adapters.google.monitoring import (
    CPU_LOAD,
    NODE_COUNT,
    TABLE_BYTES,
    CloudMonitoring,
    MonitoringError,
)
from tests.builders.recorded_http import RecordedResponse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"
NOW = datetime(2026, 12, 1, 22, 4, tzinfo=UTC)


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@dataclass
class MonitoringSession:
    """Answers `timeSeries.list` by the metric in its filter (and page token) from the
    recordings; keeps each call's query."""

    answers: dict[tuple[str, str], tuple[int, str]]
    queries: list[dict[str, list[str]]] = field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> RecordedResponse:
        parts = urlsplit(url)
        assert method == "GET" and parts.path == "/v3/projects/my-project/timeSeries"
        query = parse_qs(parts.query)
        self.queries.append(query)
        metric = query["filter"][0].split('"')[1]
        status, name = self.answers[(metric, query.get("pageToken", [""])[0])]
        return RecordedResponse(status, json.dumps(fixture(name)).encode())


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
