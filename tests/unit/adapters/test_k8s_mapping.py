"""adapters.gke.wire: Job/Pod/Event wire dicts -> JobStatus/PodInfo, quantities, API errors.

The dicts are shaped as a Kubernetes 1.33 API server returns them (and as
`ApiClient.sanitize_for_serialization` renders the client's models): camelCase, RFC 3339 times.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from adapters.gke.wire import (
    JOB_TRACKING_FINALIZER,
    api_error,
    cpu_cores,
    event_time,
    job_status,
    label_selector,
    memory_gib,
    parse_time,
    pod_info,
    releasable,
    schema_errors,
    sort_events,
    status_message,
    sweep_selector,
)
from shared.ports.cluster import ClusterError, ClusterUnreachableError, ManifestRejectedError
from tests.builders.k8s_objects import INVALID, job, pod

T0 = "2025-06-01T10:00:00Z"
T1 = "2025-06-01T10:05:30Z"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cond(kind: str, reason: str, status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": f"{kind} because {reason}",
        "lastProbeTime": T1,
        "lastTransitionTime": T1,
    }


JOBS = {
    "running": (
        job(active=4, ready=3, succeeded=2, completedIndexes="0,2", startTime=T0),
        dict(condition=None, reason=None, active=4, ready=3, succeeded=2, completed="0,2"),
    ),
    "created suspended": (
        job(suspend=True, conditions=[cond("Suspended", "JobSuspended")]),
        dict(condition="Suspended", reason="JobSuspended", suspended=True),
    ),
    "suspended, controller not synced yet": (
        job(suspend=True),
        dict(condition="Suspended", reason="JobSuspended", suspended=True),
    ),
    "resumed": (
        job(active=4, startTime=T1, conditions=[cond("Suspended", "JobResumed", "False")]),
        dict(condition=None, reason=None, active=4, suspended=False),
    ),
    "complete": (
        job(
            completions=3,
            succeeded=3,
            completedIndexes="0-2",
            startTime=T0,
            completionTime=T1,
            conditions=[
                cond("SuccessCriteriaMet", "CompletionsReached"),
                cond("Complete", "CompletionsReached"),
            ],
        ),
        dict(condition="Complete", reason="CompletionsReached", completed="0-2", done=T1),
    ),
    "failed: FailedIndexes": (
        job(
            failed=6,
            succeeded=8,
            completedIndexes="0-2,4-6,8-9",
            failedIndexes="3,7",
            conditions=[cond("FailureTarget", "FailedIndexes"), cond("Failed", "FailedIndexes")],
        ),
        dict(condition="Failed", reason="FailedIndexes", failed=6, failed_idx="3,7"),
    ),
    "failed: MaxFailedIndexesExceeded": (
        job(
            failed=12,
            failedIndexes="1,3-5",
            conditions=[cond("Failed", "MaxFailedIndexesExceeded")],
        ),
        dict(condition="Failed", reason="MaxFailedIndexesExceeded", failed_idx="1,3-5"),
    ),
    "failed: BackoffLimitExceeded": (
        job(failed=7, conditions=[cond("Failed", "BackoffLimitExceeded")]),
        dict(condition="Failed", reason="BackoffLimitExceeded", failed=7),
    ),
    "failing: FailureTarget while pods terminate": (
        job(active=2, failedIndexes="0-3", conditions=[cond("FailureTarget", "FailedIndexes")]),
        dict(condition="Failed", reason="FailedIndexes", active=2, failed_idx="0-3"),
    ),
    "failed while suspended": (
        job(suspend=True, conditions=[cond("Suspended", "JobSuspended"), cond("Failed", "X")]),
        dict(condition="Failed", reason="X", suspended=True),
    ),
    "defaults: completions/parallelism unset, no status": (
        job(completions=None, parallelism=None),
        dict(condition=None, completions=1, parallelism=1),
    ),
}


@pytest.mark.parametrize("raw,want", JOBS.values(), ids=JOBS.keys())
def test_job_status(raw: dict[str, Any], want: dict[str, Any]) -> None:
    st = job_status(raw)
    assert st.name == "pcg-demo-ingest-l2-abc123"
    assert st.labels == {"cave-pipeline/run": "r1", "cave-pipeline/layer": "2"}
    assert st.annotations == {"cave-pipeline/run-id": "r1"}
    assert st.created == at(T0) and st.created.tzinfo is not None
    assert st.condition == want.get("condition")
    assert st.reason == want.get("reason")
    assert st.suspended is want.get("suspended", False)
    assert st.completions == want.get("completions", raw["spec"].get("completions"))
    assert st.parallelism == want.get("parallelism", raw["spec"].get("parallelism"))
    assert (st.active, st.ready, st.succeeded, st.failed) == (
        want.get("active", 0),
        want.get("ready", 0),
        want.get("succeeded", raw["status"].get("succeeded", 0)),
        want.get("failed", raw["status"].get("failed", 0)),
    )
    assert st.completed_indexes == want.get("completed", raw["status"].get("completedIndexes", ""))
    assert st.failed_indexes == want.get("failed_idx", "")
    assert st.start_time == (
        at(raw["status"]["startTime"]) if "startTime" in raw["status"] else None
    )
    assert st.completion_time == (at(want["done"]) if "done" in want else None)
    assert st.finished is (st.condition in ("Complete", "Failed"))


def terminated(code: int, reason: str) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": reason, "startedAt": T0, "finishedAt": T1}}


PODS = {
    "pending unschedulable": (
        pod(
            0,
            "Pending",
            node=None,
            started=None,
            conditions=[
                cond("PodScheduled", "Unschedulable", "False")
                | {"message": "0/3 nodes are available: 3 Insufficient cpu."}
            ],
        ),
        dict(reason="FailedScheduling", node="", started=None),
    ),
    "pending, pulling the image": (
        pod(1, "Pending", state={"waiting": {"reason": "ContainerCreating"}}),
        dict(reason="ContainerCreating"),
    ),
    "running": (
        pod(2, "Running", state={"running": {"startedAt": T0}}, conditions=[cond("Ready", "")]),
        dict(reason=None),
    ),
    "succeeded": (
        pod(3, "Succeeded", state=terminated(0, "Completed")),
        dict(exit=0, reason="Completed", finished=T1),
    ),
    "failed: fatal chunk exit 42": (
        pod(4, "Failed", state=terminated(42, "Error")),
        dict(exit=42, reason="Error", finished=T1),
    ),
    "preempted: DisruptionTarget": (
        pod(
            5,
            "Failed",
            state=terminated(143, "Error"),
            conditions=[cond("DisruptionTarget", "TerminationByKubelet")],
        ),
        dict(exit=143, reason="DisruptionTarget", finished=T1),
    ),
    "exit 137 OOMKilled": (
        pod(6, "Failed", state=terminated(137, "OOMKilled")),
        dict(exit=137, reason="OOMKilled", finished=T1),
    ),
    "exit 137 SIGKILL": (
        pod(7, "Failed", state=terminated(137, "Error")),
        dict(exit=137, reason="Error", finished=T1),
    ),
    "evicted, no container state": (
        pod(8, "Failed", reason="Evicted", state={}),
        dict(reason="Evicted"),
    ),
    "worker is not the first container": (
        pod(9, "Failed", state=terminated(42, "Error"), extra_containers=1),
        dict(exit=42, reason="Error", finished=T1, cpu=1.25, mem=1.5),
    ),
}


@pytest.mark.parametrize("raw,want", PODS.values(), ids=PODS.keys())
def test_pod_info(raw: dict[str, Any], want: dict[str, Any]) -> None:
    p = pod_info(raw)
    index = int(raw["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
    assert p.name == raw["metadata"]["name"] and p.uid == raw["metadata"]["uid"]
    assert p.job_name == "pcg-demo-ingest-l2-abc123"
    assert p.index == index
    assert p.phase == raw["status"]["phase"]
    assert p.cpu_request == pytest.approx(want.get("cpu", 0.25))
    assert p.memory_request_gib == pytest.approx(want.get("mem", 0.5))
    assert p.exit_code == want.get("exit")
    assert p.reason == want.get("reason")
    assert p.node == want.get("node", "gk3-autopilot-spot-pool-1-abcd")
    assert p.created == at(T0)
    assert p.started == (at(T0) if want.get("started", T0) else None)
    assert p.finished == (at(want["finished"]) if "finished" in want else None)
    assert p.labels["cave-pipeline/layer"] == "2"


def test_pod_index_from_label_when_annotation_missing_and_unknown_is_minus_one() -> None:
    raw = pod(12, "Running")
    del raw["metadata"]["annotations"]
    assert pod_info(raw).index == 12
    raw["metadata"]["labels"] = {"job-name": "legacy"}
    info = pod_info(raw)
    assert (info.index, info.job_name) == (-1, "legacy")


QUANTITIES = [
    ("250m", 0.25, None),
    ("1", 1.0, None),
    ("1500m", 1.5, None),
    ("0.5", 0.5, None),
    (2, 2.0, None),
    ("512Mi", None, 0.5),
    ("2Gi", None, 2.0),
    ("1G", None, 1e9 / 2**30),
    ("1536M", None, 1.536e9 / 2**30),
    ("128974848", None, 128974848 / 2**30),
    ("129e6", None, 129e6 / 2**30),
    ("1Ti", None, 1024.0),
]


@pytest.mark.parametrize("text,cpu,mem", QUANTITIES, ids=[str(q[0]) for q in QUANTITIES])
def test_quantities(text: Any, cpu: float | None, mem: float | None) -> None:
    if cpu is not None:
        assert cpu_cores(text) == pytest.approx(cpu)
    if mem is not None:
        assert memory_gib(text) == pytest.approx(mem)


@pytest.mark.parametrize("bad", ["", "lots", "1Xi", "2mi"])
def test_bad_quantities_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        cpu_cores(bad)


def test_parse_time_is_aware_utc() -> None:
    assert parse_time(T0) == datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
    assert parse_time("2025-06-01T12:00:00+02:00") == datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
    assert parse_time(datetime(2025, 6, 1, 10, 0)).tzinfo is UTC  # naive -> UTC
    tz = timezone(timedelta(hours=-5))
    assert parse_time(datetime(2025, 6, 1, 5, 0, tzinfo=tz)) == datetime(2025, 6, 1, 10, tzinfo=UTC)
    assert parse_time(None) is None and parse_time("") is None


def test_events_sorted_oldest_first_by_their_latest_time() -> None:
    create = {"reason": "SuccessfulCreate", "firstTimestamp": T0, "lastTimestamp": T1, "count": 3}
    done = {"reason": "Completed", "firstTimestamp": "2025-06-01T10:06:00Z"}
    new_style = {"reason": "Suspended", "eventTime": "2025-06-01T10:01:00.123456Z"}
    bare = {"reason": "Odd", "metadata": {"creationTimestamp": "2025-06-01T09:00:00Z"}}
    ordered = sort_events([done, create, new_style, bare])
    assert [e["reason"] for e in ordered] == ["Odd", "Suspended", "SuccessfulCreate", "Completed"]
    assert event_time({"reason": "none"}) < at(T0)


def test_label_selector() -> None:
    assert label_selector({"b": "2", "a": "1"}) == "a=1,b=2"
    assert label_selector({}) == ""


def test_status_message_names_every_field() -> None:
    text = status_message(json.dumps(INVALID))
    assert text.startswith('Job.batch "pcg-x" is invalid: spec.maxFailedIndexes')
    assert text.count("spec.maxFailedIndexes") == 1  # already in the message: not repeated
    assert "spec.template.spec.containers[0].image: Required value" in text
    assert status_message("<html>502 Bad Gateway</html>") == "<html>502 Bad Gateway</html>"
    assert status_message(None, "fallback") == "fallback"
    assert status_message(b'{"kind":"Status","reason":"NotFound"}') == "NotFound"


API_ERRORS = [
    (0, ClusterUnreachableError, "no answer from the API server at https://10.0.0.1"),
    (400, ManifestRejectedError, "spec.maxFailedIndexes"),
    (422, ManifestRejectedError, "spec.template.spec.containers[0].image"),
    (401, ClusterError, "token is invalid or expired"),
    (403, ClusterError, "check the function's service account"),
    (404, ClusterError, "namespace"),
    (409, ClusterUnreachableError, "retry"),
    (410, ClusterUnreachableError, "retry later"),
    (429, ClusterUnreachableError, "busy or unavailable"),
    (500, ClusterUnreachableError, "busy or unavailable"),
    (503, ClusterUnreachableError, "https://10.0.0.1"),
    (418, ClusterError, "HTTP 418"),
]


@pytest.mark.parametrize("status,kind,words", API_ERRORS, ids=[str(e[0]) for e in API_ERRORS])
def test_api_error_classes(status: int, kind: type, words: str) -> None:
    err = api_error(status, json.dumps(INVALID), "create job pcg-x", "https://10.0.0.1")
    assert type(err) is kind
    assert "create job pcg-x" in str(err) and words in str(err)


def test_schema_errors_drop_the_argument_position() -> None:
    errors = [
        {"loc": (2, "spec", "bogusField"), "msg": "Extra inputs are not permitted"},
        {"loc": ("template",), "msg": "Field required"},
    ]
    assert schema_errors(errors) == (
        "spec.bogusField: Extra inputs are not permitted; template: Field required"
    )


# -- the sweeps of a delete and a pause (adapters.gke.cluster) ----------------------------------

UID_SELECTOR = "batch.kubernetes.io/controller-uid=u1"


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (None, UID_SELECTOR),
        ({}, UID_SELECTOR),
        ({"cave-pipeline/graph": "g1"}, UID_SELECTOR + ",cave-pipeline/graph=g1"),
        ({"b": "2", "a": "1"}, UID_SELECTOR + ",a=1,b=2"),
    ],
)
def test_a_sweep_selects_the_jobs_pods_within_the_runs_graph(scope, expected):
    assert sweep_selector(UID_SELECTOR, scope) == expected


def test_a_sweep_without_the_jobs_selector_is_refused():
    with pytest.raises(ValueError, match="selects every pod"):
        sweep_selector("", {"cave-pipeline/graph": "g1"})


DELETING = "2026-12-01T10:00:00Z"


@pytest.mark.parametrize(
    ("deleting", "phase", "finalizers", "expected"),
    [
        (DELETING, "Running", [JOB_TRACKING_FINALIZER], True),  # condemned, held
        (DELETING, "Pending", [JOB_TRACKING_FINALIZER], True),
        (DELETING, "Failed", [JOB_TRACKING_FINALIZER], True),
        (DELETING, "Succeeded", [JOB_TRACKING_FINALIZER], False),  # its completion counts
        (None, "Running", [JOB_TRACKING_FINALIZER], False),  # not condemned
        (DELETING, "Running", [], False),  # nothing holds it
        (DELETING, "Running", ["example.org/other"], False),  # not ours to release
    ],
)
def test_only_a_condemned_unsucceeded_pod_the_tracking_finalizer_holds_is_released(
    deleting, phase, finalizers, expected
):
    meta: dict[str, Any] = {"name": "p", "finalizers": finalizers}
    if deleting:
        meta["deletionTimestamp"] = deleting
    assert releasable({"metadata": meta, "status": {"phase": phase}}) is expected
