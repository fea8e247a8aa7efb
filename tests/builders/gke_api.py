"""A stand-in for the Kubernetes API server behind `GkeCluster`: `FakeServer` replaces
`ApiClient.call_api` (the one method that does HTTP) and answers as the server does (status +
Status body), so the `kubernetes` client's own exception and model code runs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.rest import RESTResponse

from adapters.gke.cluster import GkeCluster

ENDPOINT = "https://10.1.2.3"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gke_api"


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


def fake_gke(
    server: FakeServer, monkeypatch: Any, namespace: str = "pipeline", **kwargs: Any
) -> GkeCluster:
    """A GkeCluster whose requests go to `server` (request timeout 7 s; `kwargs` to the
    constructor)."""
    api = ApiClient(Configuration(host=ENDPOINT))
    monkeypatch.setattr(api, "call_api", server)
    return GkeCluster(api, namespace, request_timeout=7, **kwargs)


def api_object(name: str) -> dict[str, Any]:
    """A hand-written API object from tests/fixtures/gke_api (a fresh copy each call)."""
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def indexed_pods(n: int) -> list[dict[str, Any]]:
    """`n` pods of the fixture's layer Job: the fixture's pod with each its own name, uid and
    index; every tenth failed (exit 1, Error), every seventh still running."""
    template = api_object("pod_indexed_job_autopilot")
    pods = []
    for i in range(n):
        pod = copy.deepcopy(template)
        meta, status = pod["metadata"], pod["status"]
        name = f"pcg-lab-ingest-l2-4f2a9c-{i}-{i:05x}"
        meta["name"], meta["uid"] = name, f"0b6e1f52-93c4-4d8a-b1e7-{i:012x}"
        meta["annotations"]["batch.kubernetes.io/job-completion-index"] = str(i)
        meta["labels"]["batch.kubernetes.io/job-completion-index"] = str(i)
        pod["spec"]["hostname"] = f"pcg-lab-ingest-l2-4f2a9c-{i}"
        state = status["containerStatuses"][0]["state"]
        if i % 7 == 0:
            status["phase"] = "Running"
            state.clear()
            state["running"] = {"startedAt": "2026-03-02T14:06:02Z"}
        elif i % 10 == 0:
            status["phase"] = "Failed"
            state["terminated"].update(exitCode=1, reason="Error")
        pods.append(pod)
    return pods


def pod_list_pages(n: int, page: int = 500) -> list[dict[str, Any]]:
    """`n` fixture pods as the API server pages a PodList at `limit=page`."""
    pods = indexed_pods(n)
    pages = []
    for start in range(0, max(n, 1), page):
        last = start + page >= n
        pages.append(
            {
                "apiVersion": "v1",
                "kind": "PodList",
                "metadata": {"resourceVersion": "1740021400"}
                | (
                    {}
                    if last
                    else {
                        "continue": f"eyJ2IjoibWV0YS5rOHMuaW8vdjEi{start}",
                        "remainingItemCount": n - start - page,
                    }
                ),
                "items": pods[start : start + page],
            }
        )
    return pages
