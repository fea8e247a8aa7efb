"""Google REST calls for the doctor through an injected HTTP session: a google-auth
`AuthorizedSession` in use, a recorded-response session in tests (tests/builders).

A resource read answers its JSON (200), None (404) or `Denied` (403). A missing or refused
credential, a network failure or a timeout raise `ServiceUnreachable`, whose message names
what to do; the CLI turns it into exit 3.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from shared.doctor.facts import Denied

LOGIN = "gcloud auth application-default login"
CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
TIMEOUT_S = 6.0  # per call: the whole doctor stays within seconds on a live project


class ServiceUnreachable(ConnectionError):
    """A service (or the token service) did not answer, or no credential is usable."""


class HttpResponse(Protocol):
    status_code: int
    content: bytes


class HttpSession(Protocol):
    """What is used of a `requests.Session` (an `AuthorizedSession` is one)."""

    def request(self, method: str, url: str, **kwargs: Any) -> HttpResponse: ...


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any


def _message(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message", ""))
        if isinstance(error, str):
            return error
        return str(body.get("message", ""))  # Kubernetes' Status
    return ""


class RestApi:
    """JSON calls through `session`; `timeout` per call."""

    def __init__(self, session: HttpSession, timeout: float = TIMEOUT_S) -> None:
        self.session, self.timeout = session, timeout

    def call(self, method: str, url: str, body: Any = None) -> Reply:
        """One call; ServiceUnreachable for no answer or a refused credential (401)."""
        kwargs: dict[str, Any] = {"timeout": self.timeout}
        if body is not None:
            kwargs["json"] = body
        try:
            response = self.session.request(method, url, **kwargs)
        except ServiceUnreachable:
            raise
        except Exception as e:  # noqa: BLE001 - DNS, refused, TLS, timeout, token refresh
            raise ServiceUnreachable(
                f"{method} {url}: {type(e).__name__}: {str(e)[:200]}; check the network, "
                f"or the credentials ({LOGIN})"
            ) from None
        try:
            doc = json.loads(response.content or b"null")
        except ValueError:
            doc = None
        if response.status_code == 401:
            raise ServiceUnreachable(
                f"{method} {url}: HTTP 401 {_message(doc)}; the credentials were refused: {LOGIN}"
            )
        return Reply(response.status_code, doc)

    def resource(self, url: str, method: str = "GET", body: Any = None) -> Any:
        """The resource's JSON, None when absent (404), `Denied` when not allowed (403)."""
        reply = self.call(method, url, body)
        if reply.status in (200, 201):  # 201: Kubernetes' answer to a created review
            return reply.body
        if reply.status == 404:
            return None
        if reply.status == 403:
            return Denied(f"{method} {url.split('?')[0]}", _message(reply.body))
        if reply.status in (429, 500, 502, 503, 504):
            raise ServiceUnreachable(f"{method} {url}: HTTP {reply.status} {_message(reply.body)}")
        raise UnexpectedAnswer(f"{method} {url}: HTTP {reply.status} {_message(reply.body)}")


class UnexpectedAnswer(RuntimeError):
    """A service answered with a status the doctor does not expect (a 400, say)."""


def default_sessions(timeout: float = TIMEOUT_S) -> tuple[HttpSession, HttpSession, str]:
    """An authorized session with Application Default Credentials (their token fetched now,
    within `timeout`), a plain one for public registries, and who the credentials are.
    ServiceUnreachable names `gcloud auth application-default login` when there are none or
    the token service cannot be reached."""
    import google.auth
    import requests
    from google.auth.exceptions import DefaultCredentialsError, GoogleAuthError
    from google.auth.transport.requests import AuthorizedSession, Request

    class TimedRequest(Request):
        """google-auth's token requests, never longer than `timeout` (its default is 120 s)."""

        def __call__(
            self,
            url: str,
            method: str = "GET",
            body: Any = None,
            headers: Any = None,
            timeout: float | None = None,
            **kwargs: Any,
        ) -> Any:  # noqa: E501
            limit = min(timeout or timeout_s, timeout_s)
            return super().__call__(url, method, body, headers, timeout=limit, **kwargs)

    timeout_s = timeout
    try:
        credentials, _ = google.auth.default(scopes=[CLOUD_SCOPE])
    except DefaultCredentialsError:
        raise ServiceUnreachable(
            f"no Google credentials found: run `{LOGIN}` (or point GOOGLE_APPLICATION_CREDENTIALS "
            "at a key file)"
        ) from None
    auth_request = TimedRequest()
    try:
        credentials.refresh(auth_request)
    except GoogleAuthError as e:
        raise ServiceUnreachable(
            f"cannot get a Google access token ({type(e).__name__}: {str(e)[:160]}): no "
            f"network, or stale credentials: run `{LOGIN}`"
        ) from None
    who = getattr(credentials, "service_account_email", "") or "you"
    public = requests.Session()
    return AuthorizedSession(credentials, auth_request=auth_request), public, who
