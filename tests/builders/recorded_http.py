"""A recorded-response HTTP session for the doctor's REST adapter: answers each call from a
fixture of Google's and Kubernetes' real JSON shapes (tests/fixtures/doctor/*.json, keyed by
"METHOD URL"), records what was asked, and fails loudly on a call nobody recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor"
CONFIG = FIXTURES / "pipeline.yml"


@dataclass
class RecordedResponse:
    status_code: int
    content: bytes


@dataclass
class RecordedSession:
    """`request`/`get` as requests' sessions have them, answered from `routes`; `fail_with`
    raises instead (a network that is not there)."""

    routes: dict[str, dict[str, Any]]
    fail_with: BaseException | None = None
    asked: list[str] = field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> RecordedResponse:
        key = f"{method} {url}"
        self.asked.append(key)
        if self.fail_with is not None:
            raise self.fail_with
        if key not in self.routes:
            raise AssertionError(f"no recorded answer for {key}")
        answer = self.routes[key]
        return RecordedResponse(answer["status"], json.dumps(answer["body"]).encode())

    def get(self, url: str, **kwargs: Any) -> RecordedResponse:
        return self.request("GET", url, **kwargs)


def recorded(name: str, **changes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The routes of fixture `name` ("healthy" or "broken"), with `changes` ("METHOD URL" ->
    answer) laid over them."""
    routes = json.loads((FIXTURES / f"{name}.json").read_text())
    routes.update(changes)
    return routes


MONITORING = Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"


def monitoring_fixture(name: str) -> dict[str, Any]:
    """One recorded `timeSeries.list` response (tests/fixtures/monitoring/NAME.json)."""
    return json.loads((MONITORING / f"{name}.json").read_text())


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
        return RecordedResponse(status, json.dumps(monitoring_fixture(name)).encode())
