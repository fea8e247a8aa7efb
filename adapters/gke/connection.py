"""Connecting to a GKE API server: the endpoint and what verifies its certificate, the
google-auth token hook, and what a failed call means (the cluster interface's three errors).

The functions reach the control plane through its DNS-based endpoint
(`gke-<id>.<region>.gke.goog`, docs/deploying.md): Google's front end authorises the caller by
IAM and presents a publicly trusted certificate, so it is verified against the public CAs
(certifi) - the cluster's own CA would not verify it. An IP endpoint presents a certificate of
the cluster's CA, which must then be given.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import certifi
import google.auth.exceptions
import urllib3
from google.auth.transport.urllib3 import Request as GoogleAuthRequest
from kubernetes.client import ApiException, Configuration

from adapters.gke.wire import api_error, schema_errors
from shared.ports.cluster import ClusterError, ClusterUnreachableError, ManifestRejectedError

REFRESH_MARGIN = timedelta(minutes=5)
ENV_CA = "PIPELINE_GKE_CA"
DNS_ENDPOINT_SUFFIX = ".gke.goog"  # GKE's DNS-based control-plane endpoints

try:  # clients >= 30 check arguments (the manifest too) against their pydantic models
    from pydantic import ValidationError as _SchemaError
except ImportError:  # pragma: no cover - older clients send the dict unchecked
    _SchemaError = ()  # type: ignore[assignment,misc]


def translate(exc: Exception, action: str, endpoint: str) -> ClusterError | None:
    """The interface's error for what a client call raised (None: not ours to translate)."""
    if isinstance(exc, ApiException):  # the server answered (or the client's status 0)
        return api_error(exc.status, exc.body or exc.reason, action, endpoint)
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        # Refused, DNS, TLS handshake, timeouts: urllib3 wraps them (MaxRetryError et al.).
        return ClusterUnreachableError(
            f"{action}: cannot reach the API server at {endpoint}: "
            f"{getattr(exc, 'reason', None) or exc}; check the endpoint and the network path "
            "(authorized networks, private endpoint), then retry"
        )
    if isinstance(exc, _SchemaError):
        # The request's arguments (the manifest) fail the client's models: nothing was sent.
        # Any other model error means the client cannot read the server's answer.
        fault = ManifestRejectedError if "Api." in exc.title else ClusterError
        return fault(
            f"{action}: not valid for the Kubernetes schema: {schema_errors(exc.errors())}"
        )
    if isinstance(exc, google.auth.exceptions.TransportError):
        return ClusterUnreachableError(f"{action}: Google's token service unreachable: {exc}")
    if isinstance(exc, google.auth.exceptions.GoogleAuthError):
        return ClusterError(
            f"{action}: cannot get a Google access token: {exc}; check the credentials "
            "(the function's service account, or `gcloud auth application-default login`)"
        )
    return None


class GoogleTokenHook:
    """`Configuration.refresh_api_key_hook`: keeps a google-auth bearer token fresh.

    The client calls it before every request; it refreshes the credentials when the token is
    missing or expires within `margin` (well before the API server would answer 401), so a
    long-lived Cloud Functions instance never sends a stale token. `now` is injectable.
    """

    def __init__(
        self,
        credentials: Any,
        *,
        margin: timedelta = REFRESH_MARGIN,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        request: Callable[..., Any] | None = None,
    ) -> None:
        self.credentials, self.margin, self.now = credentials, margin, now
        self._request = request
        self._lock = threading.Lock()  # one refresh at a time across request threads
        self._stale = False

    def invalidate(self) -> None:
        """The server answered 401 (e.g. a revoked token): refresh before the next request."""
        self._stale = True

    def needs_refresh(self) -> bool:
        creds = self.credentials
        if self._stale or not getattr(creds, "token", None):
            return True
        expiry = getattr(creds, "expiry", None)
        if expiry is None:  # a token without an expiry does not lapse
            return False
        if expiry.tzinfo is None:  # google-auth keeps expiry as naive UTC
            expiry = expiry.replace(tzinfo=UTC)
        return expiry - self.now() <= self.margin

    def __call__(self, config: Configuration) -> None:
        with self._lock:
            if self.needs_refresh():
                if self._request is None:
                    pool = urllib3.PoolManager(timeout=10.0, retries=1)
                    self._request = GoogleAuthRequest(pool)
                self.credentials.refresh(self._request)
                self._stale = False
            config.api_key["authorization"] = "Bearer " + self.credentials.token


def _ca_file(ca_cert_b64: str) -> str:
    """Write the cluster CA (base64 PEM, as terraform outputs it; raw PEM also accepted) to a
    private temp file for urllib3, which verifies the API server against a file."""
    text = ca_cert_b64.strip()
    if not text.startswith("-----BEGIN"):
        try:
            text = base64.b64decode(text, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            text = ""
    if "BEGIN CERTIFICATE" not in text:
        raise ClusterError(
            f"the cluster CA is not a base64 PEM certificate: set {ENV_CA} to the cluster's "
            "master_auth.cluster_ca_certificate (terraform output)"
        )
    fd, path = tempfile.mkstemp(prefix="gke-ca-", suffix=".crt")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def api_host(endpoint: str) -> str:
    """The API server's URL: `https://` added to a bare host (or IP, with or without port)."""
    endpoint = endpoint.strip().rstrip("/")
    return endpoint if endpoint.startswith("https://") else f"https://{endpoint}"


def is_dns_endpoint(endpoint: str) -> bool:
    """True for GKE's DNS-based control-plane endpoint (a host under `.gke.goog`)."""
    host = (urlsplit(api_host(endpoint)).hostname or "").lower().rstrip(".")
    return host.endswith(DNS_ENDPOINT_SUFFIX)


def ca_for(endpoint: str, ca_cert_b64: str) -> str:
    """The CA bundle file that verifies `endpoint`: the public CAs for a DNS endpoint (whatever
    CA is given: the cluster's would fail there), else the cluster CA, written to a file;
    ClusterError naming PIPELINE_GKE_CA when an IP endpoint comes without it."""
    if is_dns_endpoint(endpoint):
        return certifi.where()
    if not ca_cert_b64.strip():
        raise ClusterError(
            f"{ENV_CA} is not set: the IP endpoint {endpoint} presents a certificate of the "
            "cluster's own CA; set it to master_auth.cluster_ca_certificate, or use the DNS "
            "endpoint (terraform output cluster_dns_endpoint), which needs no CA"
        )
    return _ca_file(ca_cert_b64)
