"""A precomputed volume's `info` file on Google Cloud Storage, read through google-auth.

`gs://bucket/path` is fetched as `https://storage.googleapis.com/bucket/path/info` with an
authorized session (Application Default Credentials: a key file named by
GOOGLE_APPLICATION_CREDENTIALS, gcloud's user credentials, or the metadata server). Every
failure raises `GridUnreadable` saying what happened (no credentials, 403, 404, not JSON), or
`GridUnreachable` when nothing answered (no network, a timeout, no token from Google's token
service); the config loader adds `data_source.size` as the way out. Importing this module
registers it with `shared.config.precomputed_info` (the CLI does).
"""

from __future__ import annotations

import json
from typing import Any, Protocol
from urllib.parse import quote, urlparse

from shared.config.precomputed_info import (
    GridUnreachable,
    GridUnreadable,
    register_info_reader,
)

GCS = "https://storage.googleapis.com"
READ_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
TIMEOUT_S = 15.0


class Session(Protocol):
    """What is used of a `google.auth.transport.requests.AuthorizedSession`."""

    def get(self, url: str, timeout: float) -> Any: ...


def info_url(watershed: str) -> str:
    """The HTTPS URL of the info file of `gs://bucket/path` (`precomputed://` allowed)."""
    parts = urlparse(watershed.removeprefix("precomputed://"))
    if parts.scheme != "gs" or not parts.netloc:
        raise GridUnreadable(f"{watershed} is not a gs://bucket/path location")
    path = parts.path.strip("/")
    key = f"{path}/info" if path else "info"
    return f"{GCS}/{parts.netloc}/{quote(key)}"


def default_session() -> Session:
    """An authorized session with Application Default Credentials (read-only scope)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, _ = google.auth.default(scopes=[READ_SCOPE])
    except DefaultCredentialsError as exc:
        raise GridUnreadable(f"no Google credentials to read it with ({exc})") from None
    return AuthorizedSession(credentials)


def _no_answer(exc: Exception) -> bool:
    """Whether `exc` means GCS did not answer or no token could be had for it: no network,
    DNS, a refused connection, a timeout, a failed token refresh (`pipeline doctor` counts
    credentials that cannot be had as unreachable too)."""
    import requests
    from google.auth.exceptions import GoogleAuthError

    no_answer = (requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)
    return isinstance(exc, (*no_answer, GoogleAuthError))


def read_gs_info(watershed: str, session: Session | None = None) -> dict[str, Any]:
    """The info document of the precomputed volume at `watershed` (gs://)."""
    url = info_url(watershed)
    try:
        response = (session or default_session()).get(url, timeout=TIMEOUT_S)
    except GridUnreadable:
        raise
    except Exception as exc:  # noqa: BLE001 - connection, DNS, token refresh: all say why
        what = f"{exc.__class__.__name__}: {exc}"
        if _no_answer(exc):
            raise GridUnreachable(f"{url} unreachable: {what}") from None
        raise GridUnreadable(f"{url} unreadable: {what}") from None
    status = getattr(response, "status_code", 0)
    if status in (401, 403):
        raise GridUnreadable(f"{url}: access denied (HTTP {status}); grant storage read")
    if status == 404:
        raise GridUnreadable(f"{url} not found (HTTP 404)")
    if status != 200:
        raise GridUnreadable(f"{url}: HTTP {status}")
    try:
        info = json.loads(response.content)
    except ValueError as exc:
        raise GridUnreadable(f"{url} is not JSON: {exc}") from None
    if not isinstance(info, dict):
        raise GridUnreadable(f"{url} is not a JSON object")
    return info


register_info_reader("gs", read_gs_info)  # load_config reads gs:// watersheds through this
