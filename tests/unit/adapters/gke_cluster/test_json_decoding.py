"""GkeCluster reads lists and Jobs as plain JSON, never through the client's model classes
(hand-written shapes: tests/fixtures/gke_api; the client is real, `call_api` answers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from kubernetes.client import ApiClient

from adapters.gke import cluster as cluster_module
from adapters.gke.wire import job_status, pod_info
from shared.ports.cluster import ClusterUnreachableError
from tests.builders.gke_api import api_object, pod_list_pages, query


@pytest.fixture
def no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any attempt to build the client's model classes from an answer."""

    def refuse(*args, **kwargs):
        raise AssertionError("the client's model classes were used to decode an answer")

    monkeypatch.setattr(ApiClient, "deserialize", refuse)
    monkeypatch.setattr(ApiClient, "response_deserialize", refuse)


def test_the_fixture_pod_maps_field_by_field() -> None:
    pod = pod_info(api_object("pod_indexed_job_autopilot"))
    assert (pod.name, pod.job_name, pod.index) == (
        "pcg-lab-ingest-l2-4f2a9c-17-x7k2p",
        "pcg-lab-ingest-l2-4f2a9c",
        17,
    )
    assert (pod.phase, pod.exit_code, pod.reason) == ("Succeeded", 0, "Completed")
    assert (pod.cpu_request, pod.memory_request_gib) == (0.25, 1.0)
    assert pod.node == "gk3-lab-cluster-nap-1q2w3e4r-5t6y7u8i-x9z8"
    assert pod.started == datetime(2026, 3, 2, 14, 5, 39, tzinfo=UTC)
    assert pod.finished == datetime(2026, 3, 2, 14, 9, 45, tzinfo=UTC)


def test_list_pods_pages_json_without_model_classes(gke, server, no_models, monkeypatch) -> None:
    monkeypatch.setattr(cluster_module, "PAGE", 10)  # three pages of a 25-pod Job
    pages = pod_list_pages(25, page=10)
    server.answer(200, api_object("job_indexed_autopilot"))
    for page in pages:
        server.answer(200, page)
    pods = gke.list_pods("pcg-lab-ingest-l2-4f2a9c")
    assert len(pods) == 25 and [p.index for p in pods] == list(range(25))
    assert {p.phase for p in pods} == {"Running", "Succeeded", "Failed"}
    assert pods[10].exit_code == 1 and pods[7].exit_code is None
    urls = [r["url"] for r in server.requests][1:]  # after the Job's GET
    assert len(urls) == 3 and "continue" not in query(urls[0])
    assert query(urls[0])["limit"] == "10"
    assert query(urls[1])["continue"] == pages[0]["metadata"]["continue"]
    assert all(r["timeout"] == 7 for r in server.requests)


def test_jobs_and_events_are_read_without_model_classes(gke, server, no_models) -> None:
    raw = api_object("job_indexed_autopilot")
    server.answer(200, raw)
    server.answer(200, {"kind": "JobList", "metadata": {}, "items": [raw]})
    server.answer(
        200,
        {"kind": "EventList", "metadata": {}, "items": [{"reason": "SuccessfulCreate"}]},
    )
    got = gke.get_job("pcg-lab-ingest-l2-4f2a9c")
    assert got == job_status(raw)
    assert (got.completed_indexes, got.failed_indexes, got.active) == (
        "0-3,5,6,8-4211,4213,4214",
        "4,7",
        4988,
    )
    assert gke.list_jobs({"cave-pipeline/run": "lab-2026-03"}) == [got]
    assert gke.job_events("pcg-lab-ingest-l2-4f2a9c") == [{"reason": "SuccessfulCreate"}]


def test_json_and_model_classes_agree_on_every_fixture_field(gke, server) -> None:
    # The mapping reads the wire form; the model classes' round trip (what the adapter did
    # before) gives the same PodInfo and JobStatus for the fixture shapes.
    api = ApiClient()
    pages = pod_list_pages(40, page=40)
    server.answer(200, api_object("job_indexed_autopilot"))
    server.answer(200, pages[0])
    models = api.deserialize(json.dumps(pages[0]), "V1PodList", "application/json")
    via_models = [pod_info(p) for p in api.sanitize_for_serialization(models)["items"]]
    assert gke.list_pods("pcg-lab-ingest-l2-4f2a9c") == sorted(
        via_models, key=lambda p: (p.index, p.created, p.name)
    )
    raw = api_object("job_indexed_autopilot")
    model = api.deserialize(json.dumps(raw), "V1Job", "application/json")
    server.answer(200, raw)
    assert gke.get_job("j") == job_status(api.sanitize_for_serialization(model))


def test_an_answer_that_is_not_json_is_transient(gke, server) -> None:
    server.answer(200, "<html>502 Bad Gateway</html>", content_type="text/html")
    with pytest.raises(ClusterUnreachableError, match="not JSON.*retry"):
        gke.list_pods("j")
    server.answer(200, '{"kind": "Job", "metad')
    with pytest.raises(ClusterUnreachableError, match="get job j: .* not JSON"):
        gke.get_job("j")
