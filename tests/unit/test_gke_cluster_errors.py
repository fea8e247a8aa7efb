"""GkeCluster without a cluster: error translation, request shape, auth and construction.

The `kubernetes` client is real; only `ApiClient.call_api` (the one method that does HTTP) is
replaced, answering as a Kubernetes API server does (status + Status body), so the client's
own exception and model code runs. The unreachable case uses a real socket: a closed port on
127.0.0.1. Google's token service has no emulator: a google-auth style credentials object
(`token`, `expiry`, `refresh(request)`) stands in for it.
"""

from __future__ import annotations

import base64
import json
import socket
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import certifi
import pytest
import urllib3
from kubernetes.client import ApiClient, ApiException, Configuration
from kubernetes.client.rest import RESTResponse

from shared.adapters.gke import cluster as gke_cluster
from shared.adapters.gke.cluster import GkeCluster, GoogleTokenHook
from shared.cluster import ClusterError, ClusterUnreachableError, ManifestRejectedError
from shared.config import load_config
from shared.manifest import render_job
from tests.unit.test_k8s_mapping import INVALID, job, pod

ENDPOINT = "https://10.1.2.3"


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


ALREADY_EXISTS = status_body(
    409, "AlreadyExists", 'jobs.batch "j1" already exists', name="j1", group="batch", kind="jobs"
)
FORBIDDEN = status_body(
    403,
    "Forbidden",
    'jobs.batch is forbidden: User "fn@p.iam.gserviceaccount.com" cannot create resource '
    '"jobs" in API group "batch" in the namespace "default": requires one of '
    '["container.jobs.create"] permission(s).',
    group="batch",
    kind="jobs",
)
UNAUTHORIZED = status_body(401, "Unauthorized", "Unauthorized")
NOT_FOUND = status_body(404, "NotFound", 'jobs.batch "j1" not found', name="j1", kind="jobs")
INTERNAL = status_body(500, "InternalError", "Internal error occurred: etcdserver: leader changed")
WAITING = status_body(
    400, "BadRequest", 'container "worker" in pod "j1-0-abc" is waiting to start: ContainerCreating'
)


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


class FakeServer:
    """Stands in for `ApiClient.call_api`: records requests, answers from a queue."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: list[Any] = []

    def answer(self, status: int, body: Any = None, content_type: str = "application/json") -> None:
        self.answers.append((status, body, content_type))

    def fail(self, exc: BaseException) -> None:
        self.answers.append(exc)

    def __call__(
        self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None
    ) -> RESTResponse:
        self.requests.append(
            dict(
                method=method,
                url=url,
                headers=header_params or {},
                body=body,
                timeout=_request_timeout,
            )
        )
        answer = self.answers.pop(0) if self.answers else (200, {}, "application/json")
        if isinstance(answer, BaseException):
            raise answer
        status, payload, content_type = answer
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload or {}).encode()
        raw = urllib3.HTTPResponse(
            body=data, status=status, headers={"content-type": content_type}, preload_content=True
        )
        return RESTResponse(raw)


@pytest.fixture(autouse=True)
def _ca_files_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """from_gke writes the CA to a temp file: keep those in the test's own folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def gke(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> GkeCluster:
    api = ApiClient(Configuration(host=ENDPOINT))
    monkeypatch.setattr(api, "call_api", server)
    return GkeCluster(api, "pipeline", request_timeout=7)


MANIFEST = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j1", "labels": {"cave-pipeline/run": "r1"}},
    "spec": {
        "completionMode": "Indexed",
        "completions": 3,
        "parallelism": 1,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "worker", "image": "python:3.12-slim"}],
            }
        },
    },
}


# -- create: the translation table --------------------------------------------------------


def test_create_201_is_true_and_posts_the_manifest_with_a_timeout(gke, server) -> None:
    server.answer(201, MANIFEST)
    assert gke.create_job(MANIFEST) is True
    req = server.requests[0]
    assert (
        req["method"] == "POST"
        and req["url"] == f"{ENDPOINT}/apis/batch/v1/namespaces/pipeline/jobs"
    )
    assert req["body"]["spec"]["completions"] == 3 and req["timeout"] == 7


def test_rendered_manifests_reach_the_server_unchanged(gke, server, tmp_path) -> None:
    """The client checks and re-serialises the body through its models: nothing the renderer
    writes may be dropped or rejected on the way (podFailurePolicy, backoffLimitPerIndex...)."""
    (tmp_path / "dataset.yml").write_text(
        json.dumps(
            {"data_source": {"size": [512, 384, 192]}, "graph_config": {"CHUNK_SIZE": [64] * 3}}
        )
    )
    (tmp_path / "pipeline.yml").write_text(
        json.dumps(
            {
                "graph_id": "toy",
                "dataset": "dataset.yml",
                "bigtable": {"project": "bt-proj", "instance": "bt-inst"},
                "images": {
                    s: "us-docker.pkg.dev/p/r/pcg:1" for s in ("ingest", "l2cache", "meshing")
                },
                "workloads": {"ingest": "pcg.ingest:process_chunk"},
                "job": {"batch_size": 15},
            }
        )
    )
    cfg = load_config(tmp_path / "pipeline.yml")
    body = render_job(cfg, "ingest", 2, run_id="run-1", parallelism=4, suspend=True)
    server.answer(201, body)
    assert gke.create_job(body) is True
    assert server.requests[0]["body"] == body


def test_create_409_already_exists_is_false(gke, server) -> None:
    server.answer(409, ALREADY_EXISTS)
    assert gke.create_job(MANIFEST) is False


def test_create_422_is_manifest_rejected_naming_the_field(gke, server) -> None:
    server.answer(422, INVALID)
    with pytest.raises(ManifestRejectedError) as info:
        gke.create_job(MANIFEST)
    text = str(info.value)
    assert "create job j1" in text and "spec.maxFailedIndexes" in text
    assert "spec.template.spec.containers[0].image: Required value" in text


def test_create_400_strict_decoding_is_manifest_rejected(gke, server) -> None:
    body = status_body(400, "BadRequest", 'strict decoding error: unknown field "spec.bogus"')
    server.answer(400, body)
    with pytest.raises(ManifestRejectedError, match='unknown field "spec.bogus"'):
        gke.create_job(MANIFEST)


def test_create_fields_unknown_to_the_client_schema_are_rejected_before_sending(gke, server):
    bad = json.loads(json.dumps(MANIFEST))
    bad["spec"]["parallelizm"] = 3
    with pytest.raises(ManifestRejectedError, match=r"spec\.parallelizm"):
        gke.create_job(bad)
    assert server.requests == []


@pytest.mark.parametrize(
    "status,body,words",
    [
        (403, FORBIDDEN, ["container.jobs.create", "credentials", "service account"]),
        (401, UNAUTHORIZED, ["token is invalid or expired", "credentials"]),
    ],
    ids=["403", "401"],
)
def test_create_auth_failures_name_credentials(gke, server, status, body, words) -> None:
    server.answer(status, body)
    with pytest.raises(ClusterError) as info:
        gke.create_job(MANIFEST)
    assert not isinstance(info.value, ClusterUnreachableError | ManifestRejectedError)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_create_server_errors_are_transient(gke, server, status) -> None:
    server.answer(status, INTERNAL if status == 500 else "upstream unavailable", "text/plain")
    with pytest.raises(ClusterUnreachableError, match=ENDPOINT):
        gke.create_job(MANIFEST)


@pytest.mark.parametrize(
    "exc",
    [
        urllib3.exceptions.MaxRetryError(
            None,
            "/apis/batch/v1",
            urllib3.exceptions.NewConnectionError(None, "Connection refused"),
        ),
        urllib3.exceptions.ReadTimeoutError(None, "/apis/batch/v1", "Read timed out."),
        urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104)),
        ConnectionRefusedError(111, "Connection refused"),
    ],
    ids=["max-retry-refused", "read-timeout", "reset", "oserror"],
)
def test_transport_failures_are_unreachable(gke, server, exc) -> None:
    server.fail(exc)
    with pytest.raises(ClusterUnreachableError, match="cannot reach the API server at " + ENDPOINT):
        gke.create_job(MANIFEST)


@pytest.mark.parametrize(
    "status,kind",
    [
        (409, None),
        (422, ManifestRejectedError),
        (403, ClusterError),
        (500, ClusterUnreachableError),
    ],
)
def test_api_exception_raised_by_call_api_is_translated_too(gke, server, status, kind) -> None:
    server.fail(ApiException(status=status, reason="x", body=json.dumps(INVALID)))
    if kind is None:
        assert gke.create_job(MANIFEST) is False
    else:
        with pytest.raises(kind):
            gke.create_job(MANIFEST)


def test_tls_failure_reported_as_status_0_is_unreachable(gke, server) -> None:
    server.fail(ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED]"))
    with pytest.raises(ClusterUnreachableError, match="CERTIFICATE_VERIFY_FAILED"):
        gke.get_job("j1")


# -- the other operations ----------------------------------------------------------------


def test_get_job_maps_and_404_is_none(gke, server) -> None:
    raw = job(completions=3, succeeded=3, completedIndexes="0-2")
    raw["status"]["conditions"] = [
        {"type": "Complete", "status": "True", "reason": "CompletionsReached"}
    ]
    server.answer(200, raw)
    server.answer(404, NOT_FOUND)
    status = gke.get_job("pcg-demo-ingest-l2-abc123")
    assert (status.completed_indexes, status.condition, status.completions) == (
        "0-2",
        "Complete",
        3,
    )
    assert status.created == datetime(2025, 6, 1, 10, tzinfo=UTC)
    assert gke.get_job("j1") is None
    assert server.requests[0]["url"].endswith("/namespaces/pipeline/jobs/pcg-demo-ingest-l2-abc123")


def test_get_job_500_is_transient(gke, server) -> None:
    server.answer(500, INTERNAL)
    with pytest.raises(ClusterUnreachableError, match="leader changed"):
        gke.get_job("j1")


def test_patch_sends_a_merge_patch_of_absolute_values(gke, server) -> None:
    server.answer(200, job())
    gke.patch_job("j1", parallelism=8, suspend=True)
    req = server.requests[0]
    assert req["method"] == "PATCH" and req["url"].endswith("/namespaces/pipeline/jobs/j1")
    assert req["headers"]["Content-Type"] == "application/merge-patch+json"
    assert req["body"] == {"spec": {"parallelism": 8, "suspend": True}} and req["timeout"] == 7
    gke.patch_job("j1")  # nothing to change: no request
    assert len(server.requests) == 1


def test_patch_errors(gke, server) -> None:
    server.answer(404, NOT_FOUND)
    with pytest.raises(ClusterError, match="not found"):
        gke.patch_job("j1", parallelism=2)
    server.answer(
        422,
        status_body(
            422, "Invalid", 'Job.batch "j1" is invalid: spec.parallelism: Invalid value: -1'
        ),
    )
    with pytest.raises(ManifestRejectedError, match="spec.parallelism"):
        gke.patch_job("j1", parallelism=-1)


def test_delete_is_background_and_404_is_fine(gke, server) -> None:
    server.answer(200, {"kind": "Status", "status": "Success"})
    server.answer(404, NOT_FOUND)
    gke.delete_job("j1")
    gke.delete_job("j1")
    req = server.requests[0]
    assert req["method"] == "DELETE" and req["timeout"] == 7
    assert (
        req["url"]
        == f"{ENDPOINT}/apis/batch/v1/namespaces/pipeline/jobs/j1?propagationPolicy=Background"
    )
    server.answer(403, FORBIDDEN)
    with pytest.raises(ClusterError, match="credentials"):
        gke.delete_job("j1")


def test_list_pods_selects_by_job_and_index_and_follows_pages(gke, server) -> None:
    page1 = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"continue": "tok"},
        "items": [pod(1, "Running", state={"running": {"startedAt": "2025-06-01T10:00:00Z"}})],
    }
    page2 = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": [pod(1, "Failed", state={"terminated": {"exitCode": 42, "reason": "Error"}})],
    }
    server.answer(200, page1)
    server.answer(200, page2)
    pods = gke.list_pods("pcg-demo-ingest-l2-abc123", index=1)
    assert [(p.index, p.phase, p.exit_code) for p in pods] == [
        (1, "Running", None),
        (1, "Failed", 42),
    ]
    first, second = (r["url"] for r in server.requests)
    assert query(first)["labelSelector"] == (
        "batch.kubernetes.io/job-name=pcg-demo-ingest-l2-abc123,"
        "batch.kubernetes.io/job-completion-index=1"
    )
    assert query(second)["continue"] == "tok" and "continue" not in query(first)
    assert all(r["timeout"] == 7 for r in server.requests)


def test_pod_log_tail_and_waiting_container(gke, server) -> None:
    server.answer(200, "line 1\nline 2\n", "text/plain")
    assert gke.pod_log("j1-0-abc", tail_lines=2) == "line 1\nline 2\n"
    url = server.requests[0]["url"]
    assert url.startswith(f"{ENDPOINT}/api/v1/namespaces/pipeline/pods/j1-0-abc/log?")
    assert query(url)["tailLines"] == "2"
    server.answer(400, WAITING)
    assert gke.pod_log("j1-0-abc") == ""
    server.answer(404, status_body(404, "NotFound", 'pods "gone" not found'))
    with pytest.raises(ClusterError, match="not found"):
        gke.pod_log("gone")


def test_job_events_field_selector_and_oldest_first(gke, server) -> None:
    def event(reason: str, last: str) -> dict[str, Any]:
        return {
            "metadata": {"name": f"j1.{reason}", "namespace": "pipeline"},
            "involvedObject": {"kind": "Job", "name": "j1", "namespace": "pipeline"},
            "reason": reason,
            "message": reason,
            "type": "Normal",
            "firstTimestamp": last,
            "lastTimestamp": last,
            "count": 1,
            "source": {"component": "job-controller"},
        }

    server.answer(
        200,
        {
            "kind": "EventList",
            "apiVersion": "v1",
            "metadata": {},
            "items": [
                event("Completed", "2025-06-01T10:09:00Z"),
                event("SuccessfulCreate", "2025-06-01T10:00:00Z"),
            ],
        },
    )
    events = gke.job_events("j1")
    assert [e["reason"] for e in events] == ["SuccessfulCreate", "Completed"]
    assert events[0]["involvedObject"]["kind"] == "Job" and events[0]["lastTimestamp"].startswith(
        "2025-06-01T10:00:00"
    )
    selector = query(server.requests[0]["url"])["fieldSelector"]
    assert selector == "involvedObject.kind=Job,involvedObject.name=j1"


def test_list_jobs_label_selector(gke, server) -> None:
    server.answer(
        200, {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": [job()]}
    )
    jobs = gke.list_jobs({"cave-pipeline/run": "r1"})
    assert [j.name for j in jobs] == ["pcg-demo-ingest-l2-abc123"]
    assert query(server.requests[0]["url"])["labelSelector"] == "cave-pipeline/run=r1"


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
        ({}, ["PIPELINE_GKE_ENDPOINT", "PIPELINE_GKE_CA", "KUBECONFIG", "PIPELINE_KUBE_CONTEXT"]),
        ({"PIPELINE_GKE_ENDPOINT": "10.0.0.1"}, ["PIPELINE_GKE_CA is not set"]),
        ({"PIPELINE_GKE_CA": "x"}, ["PIPELINE_GKE_ENDPOINT is not set"]),
    ],
    ids=["nothing", "no-ca", "no-endpoint"],
)
def test_from_env_names_the_missing_variables(env, words) -> None:
    with pytest.raises(ClusterError) as info:
        GkeCluster.from_env(env)
    for word in words:
        assert word in str(info.value)
