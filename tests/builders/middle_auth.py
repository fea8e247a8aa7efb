"""A stand-in for CAVE's sticky_auth written by hand (no recorded answers exist here): a local
HTTP server with middle_auth's two table-mapping routes as its server.py defines them:

- `POST /sticky_auth/api/v1/service/<service>/table/<table>/dataset/<dataset>` (admin token):
  200 `"success"`; 404 "Dataset does not exist."; 422 "Table mapping already exists." (one
  mapping per (service, table), whatever the dataset); 401 without a token, 403 for a token that
  is not an admin's;
- `GET /sticky_auth/api/v1/service/<service>/table/<table>/dataset`: the mapped dataset's name
  as a JSON string, or 404.

It records every request (method, path, Authorization header)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.builders.serving import serving

_MAP = re.compile(r"^/sticky_auth/api/v1/service/([^/]+)/table/([^/]+)/dataset(?:/([^/]+))?$")


class MiddleAuth(ThreadingHTTPServer):
    """The server: `datasets` CAVE knows, `admin_token`, the `mappings` (service, table) ->
    dataset made so far, and the `requests` seen."""

    def __init__(self, datasets: set[str], admin_token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.datasets, self.admin_token = datasets, admin_token
        self.mappings: dict[tuple[str, str], str] = {}
        self.requests: list[tuple[str, str, str]] = []

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: MiddleAuth

    def _answer(self, status: int, body: object, as_json: bool = False) -> None:
        """`body` as JSON (flask.jsonify's answers) or as plain text (flask.Response's)."""
        data = (json.dumps(body) if as_json or not isinstance(body, str) else body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        auth = self.headers.get("Authorization", "")
        self.server.requests.append((method, self.path, auth))
        m = _MAP.match(self.path)
        if m is None:
            return self._answer(404, "Not Found")
        if not auth.startswith("Bearer "):
            return self._answer(401, {"error": "no_token"})
        service, table, dataset = m.groups()
        if method == "GET" and dataset is None:
            mapped = self.server.mappings.get((service, table))
            if mapped is None:
                return self._answer(404, "No dataset for given service and table names")
            return self._answer(200, mapped, as_json=True)
        if method != "POST" or dataset is None:
            return self._answer(405, "Method Not Allowed")
        if auth != f"Bearer {self.server.admin_token}":
            return self._answer(403, "Requires admin privilege.")
        if dataset not in self.server.datasets:
            return self._answer(404, "Dataset does not exist.")
        if (service, table) in self.server.mappings:
            return self._answer(422, "Table mapping already exists.")
        self.server.mappings[(service, table)] = dataset
        return self._answer(200, "success", as_json=True)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self._route("POST")

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def middle_auth(datasets: set[str], admin_token: str) -> Iterator[MiddleAuth]:
    """The server, serving on a free port while the context is open."""
    with serving(MiddleAuth(datasets, admin_token)) as server:
        yield server
