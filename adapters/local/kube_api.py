"""The process kubelet's HTTP client of the API server: JSON in and out over urllib3, with the
bearer token and the API server's CA of a kubeconfig.

The kubelet reads pods by watch and writes small patches; model classes (the `kubernetes`
client's) would cost more than the node side does, so it speaks the wire form directly.
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


class ApiError(RuntimeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, body: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body[:300]}")
        self.status = status


class KubeApi:
    """A minimal client of one API server for one identity."""

    def __init__(self, server: str, token: str, ca_file: Path, timeout: float = 10.0) -> None:
        self.server = server.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._pool = urllib3.PoolManager(
            cert_reqs="CERT_REQUIRED", ca_certs=str(ca_file), maxsize=8, retries=False
        )
        self.timeout = timeout
        self._watching: set[urllib3.BaseHTTPResponse] = set()

    @classmethod
    def from_kubeconfig(cls, path: Path) -> KubeApi:
        """From a kubeconfig of a token user whose cluster carries `certificate-authority-data`."""
        config = json.loads(Path(path).read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        ca = Path(tempfile.mkstemp(prefix="kubelet-ca-", suffix=".crt")[1])
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        return cls(cluster["server"], user["token"], ca)

    def close(self) -> None:
        """Close every connection: open watches end at once."""
        for response in list(self._watching):
            getattr(response, "shutdown", response.close)()  # unblocks the reading thread
        self._pool.clear()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
        ok: tuple[int, ...] = (),
    ) -> Any:
        """One call; the decoded JSON answer (None for a status in `ok`, e.g. 404 on delete)."""
        url = self.server + path + (f"?{urlencode(query)}" if query else "")
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        response = self._pool.request(method, url, body=data, headers=headers, timeout=self.timeout)
        if response.status in ok:
            return None
        if response.status >= 300:
            raise ApiError(
                response.status, response.data.decode(errors="replace"), f"{method} {path}"
            )
        return json.loads(response.data) if response.data else None

    def watch(
        self, path: str, query: dict[str, Any], timeout_s: int = 300
    ) -> Iterator[dict[str, Any]]:
        """Watch events ({type, object}) of a collection from `query['resourceVersion']`."""
        query = {
            **query,
            "watch": "1",
            "timeoutSeconds": str(timeout_s),
            "allowWatchBookmarks": "true",
        }
        url = self.server + path + "?" + urlencode(query)
        response = self._pool.request(
            "GET",
            url,
            headers=self._headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=self.timeout, read=timeout_s + 30),
        )
        self._watching.add(response)
        try:
            if response.status >= 300:
                raise ApiError(
                    response.status, response.data.decode(errors="replace"), f"watch {path}"
                )
            buffer = b""
            for chunk in response.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            self._watching.discard(response)
            response.release_conn()


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}" + (f"/{sub}" if sub else "")
