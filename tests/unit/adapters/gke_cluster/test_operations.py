"""GkeCluster without a cluster: get, patch, delete, list, logs, events and usage as requests
and mapped answers (the client is real, `ApiClient.call_api` answers: tests/builders/gke_api).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.ports.cluster import (
    ClusterError,
    ClusterUnreachableError,
    ManifestRejectedError,
    MetricsUnavailableError,
    PodUsage,
)
from tests.builders.gke_api import (
    ENDPOINT,
    FORBIDDEN,
    INTERNAL,
    NOT_FOUND,
    WAITING,
    fake_gke,
    query,
    status_body,
)
from tests.builders.k8s_objects import job, pod

SUSPENDED = {"type": "Suspended", "status": "True", "reason": "JobSuspended"}

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


UID = "2f1e0c1a-0000-4000-8000-000000000001"  # tests.builders.k8s_objects.job's
GRAPH = {"cave-pipeline/graph": "g1"}
SWEEP = f"batch.kubernetes.io/controller-uid%3D{UID}%2Ccave-pipeline/graph%3Dg1"
PODS = f"{ENDPOINT}/api/v1/namespaces/pipeline/pods"
NO_PODS = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []}


def test_a_delete_suspends_sweeps_the_pods_at_grace_0_then_deletes_in_background(
    gke, server
) -> None:
    server.answer(200, job(active=2))  # the Job as read
    server.answer(200, job(active=2, suspend=True))  # the suspend
    server.answer(200, NO_PODS)  # the pods deleted
    server.answer(200, {"kind": "Status", "status": "Success"})
    gke.delete_job("j1", GRAPH)
    get, suspend, pods, delete = server.requests
    assert get["method"] == "GET"
    assert suspend["method"] == "PATCH" and suspend["body"] == {"spec": {"suspend": True}}
    assert pods["method"] == "DELETE" and pods["url"].startswith(PODS + "?")
    query = pods["url"].split("?", 1)[1].split("&")
    # every pod of that Job (by its uid) within the graph, Failed ones too: the Job goes
    assert sorted(query) == sorted(
        [f"labelSelector={SWEEP}", "gracePeriodSeconds=0", "propagationPolicy=Background"]
    )
    assert delete["method"] == "DELETE" and delete["timeout"] == 7
    assert (
        delete["url"]
        == f"{ENDPOINT}/apis/batch/v1/namespaces/pipeline/jobs/j1?propagationPolicy=Background"
    )


def test_a_delete_of_a_missing_job_is_fine_and_a_refused_suspend_no_obstacle(gke, server) -> None:
    server.answer(404, NOT_FOUND)
    gke.delete_job("j1")
    assert len(server.requests) == 1
    server.answer(200, job(active=1))
    server.answer(422, {"kind": "Status", "code": 422, "message": "compute class gone"})
    server.answer(200, NO_PODS)
    server.answer(404, NOT_FOUND)  # gone meanwhile
    gke.delete_job("j1", GRAPH)
    assert [r["method"] for r in server.requests[1:]] == ["GET", "PATCH", "DELETE", "DELETE"]
    server.answer(200, job(active=1))
    server.answer(403, FORBIDDEN)
    with pytest.raises(ClusterError, match="credentials"):
        gke.delete_job("j1")


def test_a_drain_spares_terminal_pods_and_releases_the_held_ones(gke, server) -> None:
    held = pod(1, "Running")
    held["metadata"].update(
        deletionTimestamp="2025-06-01T10:05:00Z", finalizers=["batch.kubernetes.io/job-tracking"]
    )
    server.answer(200, job(active=2, suspend=True, conditions=[SUSPENDED]))
    server.answer(200, NO_PODS)
    server.answer(200, {**NO_PODS, "items": [held, pod(0, "Failed")]})
    server.answer(200, held)
    gke.drain_job("j1", GRAPH)
    _, sweep, listing, release = server.requests
    query = sweep["url"].split("?", 1)[1].split("&")
    assert sorted(query) == sorted(
        [
            f"labelSelector={SWEEP}",
            "gracePeriodSeconds=0",
            "propagationPolicy=Background",
            "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed",
        ]
    )
    assert listing["method"] == "GET" and f"labelSelector={SWEEP}" in listing["url"]
    assert release["method"] == "PATCH"
    assert release["url"] == f"{PODS}/{held['metadata']['name']}"
    assert release["body"] == {"metadata": {"finalizers": None}}
    assert release["headers"]["Content-Type"] == "application/merge-patch+json"


def test_a_drain_sweeps_once_the_job_controller_has_marked_the_suspension(
    server, monkeypatch
) -> None:
    """Until the Job controller marks the Job Suspended, a sync it began earlier may still
    create a replacement pod that an earlier sweep would miss (CI saw one stay on a lost node)."""
    naps: list[float] = []
    gke = fake_gke(server, monkeypatch, sleep=naps.append)
    server.answer(200, job(active=1, suspend=True))
    server.answer(200, job(active=1, suspend=True))
    server.answer(200, job(active=0, suspend=True, conditions=[SUSPENDED]))
    server.answer(200, NO_PODS)
    server.answer(200, NO_PODS)
    gke.drain_job("j1", GRAPH)
    methods = [r["method"] for r in server.requests]
    assert methods == ["GET", "GET", "GET", "DELETE", "GET"] and naps == [0.2, 0.2]


def test_a_drain_waits_for_a_stalled_job_controller_ten_seconds_at_most(
    server, monkeypatch, caplog
) -> None:
    naps: list[float] = []
    gke = fake_gke(server, monkeypatch, sleep=naps.append)
    for _ in range(51):
        server.answer(200, job(active=1, suspend=True))
    server.answer(200, NO_PODS)
    server.answer(200, NO_PODS)
    gke.drain_job("j1", GRAPH)
    assert sum(naps) == pytest.approx(10.0)
    assert [r["method"] for r in server.requests][-2:] == ["DELETE", "GET"]
    assert "has not marked its suspension in 10 s" in caplog.text


def test_a_drain_of_a_finished_or_missing_job_does_nothing(gke, server) -> None:
    server.answer(404, NOT_FOUND)
    server.answer(200, job(conditions=[{"type": "Complete", "status": "True"}]))
    gke.drain_job("j1")
    gke.drain_job("j1")
    assert [r["method"] for r in server.requests] == ["GET", "GET"]


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
    server.answer(200, job())  # the Job now under the name: its uid selects the pods
    server.answer(200, page1)
    server.answer(200, page2)
    pods = gke.list_pods("pcg-demo-ingest-l2-abc123", index=1)
    assert [(p.index, p.phase, p.exit_code) for p in pods] == [
        (1, "Running", None),
        (1, "Failed", 42),
    ]
    get, first, second = (r["url"] for r in server.requests)
    assert get.endswith("/namespaces/pipeline/jobs/pcg-demo-ingest-l2-abc123")
    # by the Job's uid, not its name: an earlier Job of the name has other pods
    assert query(first)["labelSelector"] == (
        "batch.kubernetes.io/controller-uid=2f1e0c1a-0000-4000-8000-000000000001,"
        "batch.kubernetes.io/job-completion-index=1"
    )
    assert query(second)["continue"] == "tok" and "continue" not in query(first)
    assert all(r["timeout"] == 7 for r in server.requests)


def test_list_pods_of_a_job_just_read_does_not_read_it_again(gke, server) -> None:
    """The reconcile reads each running layer's Job, then its pods: one GET of the Job."""
    server.answer(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})
    assert gke.list_pods("pcg-demo-ingest-l2-abc123", job_uid="u-1") == []
    [only] = server.requests
    assert query(only["url"])["labelSelector"] == "batch.kubernetes.io/controller-uid=u-1"


def test_list_pods_of_a_job_that_is_gone_is_empty(gke, server) -> None:
    server.answer(404, NOT_FOUND)  # orphans of a deleted Job are no generation's now
    assert gke.list_pods("j1") == [] and len(server.requests) == 1


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


def test_pod_log_updated_reads_one_timestamped_line(gke, server) -> None:
    server.answer(200, '2026-12-01T19:52:07.123456789Z {"message": "x"}\n', "text/plain")
    assert gke.pod_log_updated("j1-0-abc") == datetime(2026, 12, 1, 19, 52, 7, 123456, UTC)
    url = server.requests[0]["url"]
    assert url.startswith(f"{ENDPOINT}/api/v1/namespaces/pipeline/pods/j1-0-abc/log?")
    assert query(url)["tailLines"] == "1" and query(url)["timestamps"] == "true"
    server.answer(400, WAITING)
    assert gke.pod_log_updated("j1-0-abc") is None
    server.answer(404, status_body(404, "NotFound", 'pods "gone" not found'))
    with pytest.raises(ClusterError, match="not found"):
        gke.pod_log_updated("gone")


def test_delete_pod_uses_the_pods_grace_and_404_is_fine(gke, server) -> None:
    server.answer(200, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "j1-0-abc"}})
    server.answer(404, NOT_FOUND)
    gke.delete_pod("j1-0-abc")
    gke.delete_pod("j1-0-abc")
    req = server.requests[0]
    assert req["method"] == "DELETE" and req["timeout"] == 7
    assert req["url"] == f"{ENDPOINT}/api/v1/namespaces/pipeline/pods/j1-0-abc"


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


def _pod_event(pod: str, reason: str, at: str, uid: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{pod}.{reason}", "namespace": "pipeline"},
        "involvedObject": {"kind": "Pod", "name": pod, "namespace": "pipeline", "uid": uid},
        "reason": reason,
        "lastTimestamp": at,
    }


def test_pod_events_are_the_jobs_pods_across_pages_oldest_first(gke, server) -> None:
    page = {"kind": "EventList", "apiVersion": "v1"}
    server.answer(200, job())  # created 2025-06-01T10:00Z, uid ...0001
    server.answer(
        200,
        {
            **page,
            "metadata": {"continue": "t1"},
            "items": [
                _pod_event("j1-1-abc", "OOMKilling", "2026-01-01T00:00:05Z"),
                # an earlier Job's pod of the name, still listed (orphaned): left out
                _pod_event("j1-1-old", "OOMKilling", "2026-01-01T00:00:06Z", uid="old-pod"),
                # before this Job was created: an earlier generation's, its pod gone
                _pod_event("j1-2-gone", "OOMKilling", "2025-06-01T09:59:00Z", uid="gone"),
                _pod_event("other-0-x", "Pulled", "2026-01-01T00:00:01Z"),
                _pod_event("j1-extra-0-x", "Pulled", "2026-01-01T00:00:01Z"),
            ],
        },
    )
    server.answer(
        200,
        {
            **page,
            "metadata": {},
            "items": [_pod_event("j1-0-xyz", "FailedScheduling", "2026-01-01T00:00:02Z")],
        },
    )
    orphan = pod(1, "Running")
    orphan["metadata"].update(
        uid="old-pod", labels={**orphan["metadata"]["labels"], **_uid_labels("old-job")}
    )
    server.answer(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [orphan]})
    events = gke.pod_events("j1")
    assert [e["reason"] for e in events] == ["FailedScheduling", "OOMKilling"]
    assert [e["involvedObject"]["name"] for e in events] == ["j1-0-xyz", "j1-1-abc"]
    _, first, second, pods = (query(r["url"]) for r in server.requests)
    assert first["fieldSelector"] == "involvedObject.kind=Pod"
    assert second["continue"] == "t1"
    assert pods["labelSelector"] == "batch.kubernetes.io/job-name=j1"


def _uid_labels(uid: str) -> dict[str, str]:
    return {"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid}


def test_pod_events_errors_are_translated(gke, server) -> None:
    server.answer(500, INTERNAL)
    with pytest.raises(ClusterUnreachableError):
        gke.pod_events("j1")


def test_pod_usage_asks_the_metrics_api_for_the_jobs_pods(gke, server) -> None:
    item = {
        "metadata": {"name": "j1-0-x"},
        "containers": [{"name": "worker", "usage": {"cpu": "500m", "memory": "256Mi"}}],
    }
    server.answer(200, job())
    server.answer(200, {"kind": "PodMetricsList", "items": [item]})
    assert gke.pod_usage("j1") == {"j1-0-x": PodUsage(0.5, 0.25)}
    request = server.requests[1]
    assert "/apis/metrics.k8s.io/v1beta1/namespaces/pipeline/pods" in request["url"]
    assert query(request["url"])["labelSelector"] == (
        "batch.kubernetes.io/controller-uid=2f1e0c1a-0000-4000-8000-000000000001"
    )
    assert request["timeout"] == 7


@pytest.mark.parametrize("status", [403, 404, 503])
def test_pod_usage_explains_a_missing_metrics_api(gke, server, status) -> None:
    server.answer(200, job())
    server.answer(status, status_body(status, "Nope", "no metrics"))
    with pytest.raises(MetricsUnavailableError, match="metrics API"):
        gke.pod_usage("j1")
