"""GkeCluster without a cluster: how creating a Job translates the API server's answers and
transport failures into the interface's errors (and the request it sends).

The `kubernetes` client is real; only `ApiClient.call_api` is replaced (tests/builders/gke_api).
"""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client import ApiException

from shared.config.config_files import load_config
from shared.jobs.manifest import render_job
from shared.ports.cluster import ClusterError, ClusterUnreachableError, ManifestRejectedError
from tests.builders.gke_api import (
    ALREADY_EXISTS,
    ENDPOINT,
    FORBIDDEN,
    INTERNAL,
    MANIFEST,
    UNAUTHORIZED,
    status_body,
)
from tests.builders.k8s_objects import INVALID

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
