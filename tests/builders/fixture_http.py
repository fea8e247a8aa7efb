"""An HTTP session answering from fixtures for the doctor's REST adapter: answers each call
from a fixture written by hand in Google's and Kubernetes' published JSON shapes
(tests/fixtures/doctor/*.json, keyed by "METHOD URL"; tests/fixtures/monitoring/ for
Monitoring), records what was asked, and fails loudly on a call no fixture answers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor"
CONFIG = FIXTURES / "pipeline.yml"


@dataclass
class FixtureResponse:
    status_code: int
    content: bytes


@dataclass
class FixtureSession:
    """`request`/`get` as requests' sessions have them, answered from `routes`; `fail_with`
    raises instead (a network that is not there)."""

    routes: dict[str, dict[str, Any]]
    fail_with: BaseException | None = None
    asked: list[str] = field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> FixtureResponse:
        key = f"{method} {url}"
        self.asked.append(key)
        if self.fail_with is not None:
            raise self.fail_with
        if key not in self.routes:
            raise AssertionError(f"no fixture answers {key}")
        answer = self.routes[key]
        return FixtureResponse(answer["status"], json.dumps(answer["body"]).encode())

    def get(self, url: str, **kwargs: Any) -> FixtureResponse:
        return self.request("GET", url, **kwargs)


def doctor_routes(name: str, **changes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The routes of fixture `name` ("healthy" or "broken"), with `changes` ("METHOD URL" ->
    answer) laid over them."""
    routes = json.loads((FIXTURES / f"{name}.json").read_text())
    routes.update(changes)
    return routes


MONITORING = Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"


def monitoring_fixture(name: str) -> dict[str, Any]:
    """One hand-written `timeSeries.list` response (tests/fixtures/monitoring/NAME.json)."""
    return json.loads((MONITORING / f"{name}.json").read_text())


@dataclass
class MonitoringSession:
    """Answers `timeSeries.list` by the metric in its filter (and page token) from the
    fixtures; keeps each call's query."""

    answers: dict[tuple[str, str], tuple[int, str]]
    queries: list[dict[str, list[str]]] = field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> FixtureResponse:
        parts = urlsplit(url)
        assert method == "GET" and parts.path == "/v3/projects/my-project/timeSeries"
        query = parse_qs(parts.query)
        self.queries.append(query)
        metric = query["filter"][0].split('"')[1]
        status, name = self.answers[(metric, query.get("pageToken", [""])[0])]
        return FixtureResponse(status, json.dumps(monitoring_fixture(name)).encode())
