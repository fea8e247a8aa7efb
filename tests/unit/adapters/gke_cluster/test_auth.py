"""GkeCluster's authentication and construction: the google-auth token hook (refresh before
expiry, after a 401), `from_gke` (CA, credentials, an unreachable endpoint) and `from_env`.

Google's token service has no emulator: a google-auth style credentials object (`token`,
`expiry`, `refresh(request)`) stands in for it; the unreachable case uses a closed port.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import certifi
import pytest
from kubernetes.client import Configuration

from adapters.gke import cluster as gke_cluster
from adapters.gke.cluster import GkeCluster, GoogleTokenHook
from adapters.gke.connection import is_dns_endpoint
from shared.ports.cluster import ClusterError, ClusterUnreachableError
from tests.builders.gke_api import (
    ENDPOINT,
    MANIFEST,
    NOT_FOUND,
    UNAUTHORIZED,
    FakeServer,
)

# -- auth: the token hook ------------------------------------------------------------------


class FakeCredentials:
    """google-auth style: `token`, naive-UTC `expiry`, `refresh(request)`."""

    def __init__(self, token: str | None, expires_in: timedelta | None) -> None:
        self.token = token
        self.expiry = (
            None if expires_in is None else datetime.now(UTC).replace(tzinfo=None) + expires_in
        )
        self.refreshes = 0

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        self.token = f"fresh-{self.refreshes}"
        self.expiry = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)


@pytest.mark.parametrize(
    "token,expires_in,refreshed",
    [
        ("old", timedelta(minutes=2), True),  # within the 5-minute margin
        ("old", timedelta(seconds=-30), True),  # already expired
        (None, None, True),  # never fetched
        ("old", timedelta(minutes=30), False),
        ("old", None, False),  # no expiry: does not lapse
    ],
    ids=["expiring", "expired", "no-token", "fresh", "no-expiry"],
)
def test_token_hook_refreshes_before_expiry(token, expires_in, refreshed) -> None:
    creds = FakeCredentials(token, expires_in)
    config = Configuration(host=ENDPOINT)
    GoogleTokenHook(creds, request=object())(config)
    assert creds.refreshes == (1 if refreshed else 0)
    assert config.api_key["authorization"] == "Bearer " + ("fresh-1" if refreshed else "old")


def test_token_hook_uses_the_injected_clock() -> None:
    creds = FakeCredentials("old", timedelta(hours=1))
    later = lambda: datetime.now(UTC) + timedelta(minutes=56)  # noqa: E731
    hook = GoogleTokenHook(creds, now=later, request=object())
    hook(Configuration(host=ENDPOINT))
    assert creds.refreshes == 1


def test_from_gke_sends_a_fresh_bearer_token_on_every_request(monkeypatch) -> None:
    creds = FakeCredentials("old", timedelta(minutes=1))
    cluster = GkeCluster.from_gke("10.1.2.3", _ca_b64(), "pipeline", credentials=creds)
    server = FakeServer()
    monkeypatch.setattr(cluster.api_client, "call_api", server)
    server.answer(404, NOT_FOUND)
    server.answer(404, NOT_FOUND)
    assert cluster.get_job("j1") is None
    creds.expiry = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=4)
    assert cluster.get_job("j1") is None
    auth = [r["headers"]["authorization"] for r in server.requests]
    assert auth == ["Bearer fresh-1", "Bearer fresh-2"]
    assert server.requests[0]["url"].startswith(
        "https://10.1.2.3/apis/batch/v1/namespaces/pipeline/"
    )


def test_a_401_makes_the_next_request_refresh_the_token(monkeypatch) -> None:
    creds = FakeCredentials("revoked", timedelta(minutes=50))
    cluster = GkeCluster.from_gke("10.1.2.3", _ca_b64(), credentials=creds)
    server = FakeServer()
    monkeypatch.setattr(cluster.api_client, "call_api", server)
    server.answer(401, UNAUTHORIZED)
    server.answer(404, NOT_FOUND)
    with pytest.raises(ClusterError, match="401"):
        cluster.get_job("j1")
    assert cluster.get_job("j1") is None
    auth = [r["headers"]["authorization"] for r in server.requests]
    assert auth == ["Bearer revoked", "Bearer fresh-1"]


def test_refresh_failure_is_a_credentials_error(monkeypatch) -> None:
    import google.auth.exceptions

    class Broken(FakeCredentials):
        def refresh(self, request: Any) -> None:
            raise google.auth.exceptions.RefreshError("invalid_grant: account disabled")

    cluster = GkeCluster.from_gke("10.1.2.3", _ca_b64(), credentials=Broken(None, None))
    monkeypatch.setattr(cluster.api_client, "call_api", FakeServer())
    with pytest.raises(ClusterError, match="invalid_grant.*check the credentials"):
        cluster.get_job("j1")


# -- construction ----------------------------------------------------------------------------


def _ca_b64() -> str:
    """A real PEM certificate (the first of certifi's bundle), base64 as terraform outputs it."""
    pem = Path(certifi.where()).read_text()
    first = pem[
        pem.index("-----BEGIN CERTIFICATE-----") : pem.index("-----END CERTIFICATE-----") + 25
    ]
    return base64.b64encode(first.encode()).decode()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_from_gke_unreachable_endpoint_fails_fast_naming_it() -> None:
    port = _closed_port()
    creds = FakeCredentials("tok", timedelta(hours=1))
    cluster = GkeCluster.from_gke(
        f"127.0.0.1:{port}", _ca_b64(), credentials=creds, request_timeout=2, retries=0
    )
    t0 = time.monotonic()
    with pytest.raises(ClusterUnreachableError) as info:
        cluster.get_job("j1")
    assert time.monotonic() - t0 < 5
    assert f"https://127.0.0.1:{port}" in str(info.value)
    with pytest.raises(ClusterUnreachableError):
        cluster.create_job(MANIFEST)


def test_from_gke_writes_the_ca_and_rejects_garbage() -> None:
    creds = FakeCredentials("tok", None)
    cluster = GkeCluster.from_gke("https://10.1.2.3", _ca_b64(), credentials=creds)
    config = cluster.api_client.configuration
    assert config.host == "https://10.1.2.3" and config.verify_ssl
    assert Path(config.ssl_ca_cert).read_text().startswith("-----BEGIN CERTIFICATE-----")
    with pytest.raises(ClusterError, match="PIPELINE_GKE_CA"):
        GkeCluster.from_gke("10.1.2.3", "bm90IGEgY2VydA==", credentials=creds)


DNS_ENDPOINT = "gke-0123456789abcdef0123456789abcdef01234.us-east1.gke.goog"


@pytest.mark.parametrize(
    "endpoint,dns",
    [
        (DNS_ENDPOINT, True),
        (f"https://{DNS_ENDPOINT}", True),
        (f"{DNS_ENDPOINT}:443", True),
        ("GKE-abc.europe-west2.GKE.goog.", True),
        ("10.1.2.3", False),
        ("https://34.75.1.2:443", False),
        ("gke.goog.example.org", False),
        ("kubernetes.default.svc", False),
    ],
)
def test_which_endpoints_are_gke_dns_endpoints(endpoint, dns) -> None:
    assert is_dns_endpoint(endpoint) is dns


def test_from_gke_verifies_the_dns_endpoint_against_the_public_cas() -> None:
    """The DNS endpoint presents a publicly trusted certificate: no cluster CA is needed, and
    one given is not used (it would fail the handshake)."""
    creds = FakeCredentials("tok", None)
    for ca in ("", _ca_b64()):
        cluster = GkeCluster.from_gke(DNS_ENDPOINT, ca, credentials=creds)
        config = cluster.api_client.configuration
        assert config.host == f"https://{DNS_ENDPOINT}" and config.verify_ssl
        assert config.ssl_ca_cert == certifi.where()
    with pytest.raises(ClusterError, match="PIPELINE_GKE_CA is not set.*DNS endpoint"):
        GkeCluster.from_gke("10.1.2.3", "", credentials=creds)


def test_from_env_needs_only_the_dns_endpoint(monkeypatch) -> None:
    creds = FakeCredentials("tok", None)
    monkeypatch.setattr(gke_cluster.google.auth, "default", lambda scopes: (creds, "proj"))
    env = {"PIPELINE_GKE_ENDPOINT": DNS_ENDPOINT, "PIPELINE_NAMESPACE": "cave-pipeline"}
    cluster = GkeCluster.from_env(env)
    assert cluster.endpoint == f"https://{DNS_ENDPOINT}" and cluster.namespace == "cave-pipeline"
    assert cluster.api_client.configuration.ssl_ca_cert == certifi.where()


def test_from_gke_without_google_credentials_says_what_to_do(monkeypatch) -> None:
    import google.auth.exceptions

    def no_adc(**kwargs: Any) -> Any:
        raise google.auth.exceptions.DefaultCredentialsError("Could not find ADC")

    monkeypatch.setattr(gke_cluster.google.auth, "default", no_adc)
    with pytest.raises(ClusterError, match="application-default login"):
        GkeCluster.from_gke("10.1.2.3", _ca_b64())


def test_from_env_prefers_endpoint_and_ca(monkeypatch) -> None:
    creds = FakeCredentials("tok", None)
    monkeypatch.setattr(gke_cluster.google.auth, "default", lambda scopes: (creds, "proj"))
    env = {
        "PIPELINE_GKE_ENDPOINT": "10.9.8.7",
        "PIPELINE_GKE_CA": _ca_b64(),
        "PIPELINE_NAMESPACE": "pcg",
        "KUBECONFIG": "/nonexistent",
    }
    cluster = GkeCluster.from_env(env)
    assert cluster.namespace == "pcg" and cluster.endpoint == "https://10.9.8.7"


def test_from_env_kubeconfig(tmp_path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    cluster = GkeCluster.from_env({"KUBECONFIG": str(kubeconfig), "PIPELINE_KUBE_CONTEXT": "ctx"})
    assert cluster.endpoint == "https://127.0.0.1:6443" and cluster.namespace == "default"
    with pytest.raises(ClusterError, match="context 'nope'"):
        GkeCluster.from_env({"KUBECONFIG": str(kubeconfig), "PIPELINE_KUBE_CONTEXT": "nope"})


@pytest.mark.parametrize(
    "env,words",
    [
        (
            {},
            [
                "PIPELINE_GKE_ENDPOINT",
                "cluster_dns_endpoint",
                "KUBECONFIG",
                "PIPELINE_KUBE_CONTEXT",
            ],
        ),
        ({"PIPELINE_GKE_ENDPOINT": "10.0.0.1"}, ["PIPELINE_GKE_CA is not set", "DNS endpoint"]),
        ({"PIPELINE_GKE_CA": "x"}, ["PIPELINE_GKE_ENDPOINT is not set"]),
    ],
    ids=["nothing", "no-ca", "no-endpoint"],
)
def test_from_env_names_the_missing_variables(env, words) -> None:
    with pytest.raises(ClusterError) as info:
        GkeCluster.from_env(env)
    for word in words:
        assert word in str(info.value)
