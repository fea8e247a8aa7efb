"""A recorded-response HTTP session for the doctor's REST adapter: answers each call from a
fixture of Google's and Kubernetes' real JSON shapes (tests/fixtures/doctor/*.json, keyed by
"METHOD URL"), records what was asked, and fails loudly on a call nobody recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
