"""Every fixture of a Google API against that API's published discovery document (the response
schema of the method it stands for; an error answer against Google's error envelope): no
unknown field, no value of the wrong type or format, no string outside its enum. Monitoring's
points keep the interval rules of their metric kind, and every Kubernetes Job fixture's counts
agree with its index lists. A fixture folder that gains a file no rule covers fails here, so
none goes unchecked (the READMEs of tests/fixtures/ say which files were written by hand)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.model import intervals
from tests.builders.discovery import (
    ERROR_ENVELOPE,
    discovery_document,
    document_for,
    method,
    method_at,
    response_problems,
    schema_problems,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOGLE_FOLDERS = ("monitoring", "cloudbilling", "gke_log_entries", "doctor")
KUBERNETES_FOLDERS = ("gke_api", "gke_pods")
# Not an API answer: the doctor's config and dataset files
NOT_ANSWERS = {"doctor/pipeline.yml", "doctor/dataset.yml"}

# What each fixture file stands for: a method's answer by its id, or one schema of a document.
BY_FILE = {
    "cloudbilling/skus_page1.json": ("cloudbilling.v1.json", "cloudbilling.services.skus.list"),
    "cloudbilling/skus_page2.json": ("cloudbilling.v1.json", "cloudbilling.services.skus.list"),
}
BY_FOLDER = {
    "monitoring": ("monitoring.v3.json", "monitoring.projects.timeSeries.list"),
    # LogEntries as the sink publishes them (no method: the LogEntry schema itself)
    "gke_log_entries": ("logging.v2.json", "#LogEntry"),
}


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    return {}


def document(documents: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    if name not in documents:
        documents[name] = discovery_document(name)
    return documents[name]


def fixture_files(folders: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{folder}/{p.name}"
        for folder in folders
        for p in (FIXTURES / folder).iterdir()
        if p.name != "README.md" and f"{folder}/{p.name}" not in NOT_ANSWERS
    )


def answers(rel: str, body: Any) -> Iterator[tuple[str, str, str, int, Any]]:
    """(where, document, method id or #Schema, HTTP status, body) of each answer a fixture
    file holds: the doctor's fixtures are routes of many APIs, keyed by "METHOD URL"."""
    if rel.startswith("doctor/"):
        for key, answer in body.items():
            http_method, url = key.split(" ", 1)
            name = document_for(url)
            if name is not None:  # Kubernetes, Docker Hub, a GCS object's bytes: not checked
                yield key, name, f"{http_method} {url}", answer["status"], answer["body"]
        return
    name, what = BY_FILE.get(rel) or BY_FOLDER[rel.split("/")[0]]
    status = 403 if "error" in body else 200  # a refusal as the API sends it
    yield rel, name, what, status, body


def problems_of(rel: str, body: Any, documents: dict[str, dict[str, Any]]) -> list[str]:
    """Where the answers of fixture file `rel` (holding `body`) leave their published shape."""
    out: list[str] = []
    for where, name, what, status, answer in answers(rel, body):
        doc = document(documents, name)
        if not 200 <= status < 300:
            out += schema_problems(answer, ERROR_ENVELOPE, doc["schemas"], where)
        elif what.startswith("#"):
            out += schema_problems(answer, {"$ref": what[1:]}, doc["schemas"], where)
        else:
            m = method_at(doc, *what.split(" ", 1)) if " " in what else method(doc, what)
            out += response_problems(answer, m.get("response"), doc, where)
        if name == "monitoring.v3.json" and 200 <= status < 300:
            out += interval_problems(answer, where)
    return out


def interval_problems(body: dict[str, Any], at: str) -> list[str]:
    """Monitoring's TimeInterval rules by metric kind: a GAUGE point is one instant (start, if
    given, equals end); a CUMULATIVE or DELTA point spans time (start before end)."""
    out = []
    for i, series in enumerate(body.get("timeSeries") or []):
        kind = series.get("metricKind")
        for j, point in enumerate(series.get("points") or []):
            interval = point.get("interval") or {}
            start, end = interval.get("startTime"), interval.get("endTime")
            where = f"{at}.timeSeries[{i}].points[{j}].interval"
            # the fixtures write UTC "Z" times of one precision, so text order is time order
            if kind == "GAUGE" and start not in (None, end):
                out.append(f"{where}: a GAUGE point's start {start} is not its end {end}")
            if kind in ("CUMULATIVE", "DELTA") and not (start and end and start < end):
                out.append(f"{where}: a {kind} point needs start < end, got {start}..{end}")
    return out


@pytest.mark.parametrize("rel", fixture_files(GOOGLE_FOLDERS))
def test_every_google_api_fixture_has_the_published_shape(rel, documents) -> None:
    body = json.loads((FIXTURES / rel).read_text())
    assert list(answers(rel, body)), f"{rel}: no answer of a Google API in it"
    assert problems_of(rel, body, documents) == []


@pytest.mark.parametrize(
    ("rel", "break_it", "found"),
    [
        (
            "monitoring/container_cpu.json",
            lambda b: b["timeSeries"][0].update(metricKind="COUNTER"),
            "'COUNTER' is none of",
        ),
        (
            "monitoring/cpu_load.json",
            lambda b: b["timeSeries"][0]["points"][0]["value"].update(doubleValue="0.5"),
            "doubleValue: a number expected",
        ),
        (
            "monitoring/node_count.json",
            lambda b: b.update(partialErrors=[]),
            "'partialErrors' is not a property",
        ),
        (
            "monitoring/container_cpu.json",
            lambda b: b["timeSeries"][0]["points"][0]["interval"].update(
                startTime="2026-12-01T22:03:00Z"
            ),
            "a CUMULATIVE point needs start < end",
        ),
        (
            "monitoring/container_memory.json",
            lambda b: b["timeSeries"][0]["points"][0]["interval"].update(endTime="22:03"),
            "is no google-datetime",
        ),
        (
            "monitoring/denied.json",
            lambda b: b["error"].update(status="DENIED"),
            "'DENIED' is none of",
        ),
        (
            "gke_log_entries/pod_killing.json",
            lambda b: b.update(severity="LOUD"),
            "'LOUD' is none of",
        ),
        (
            "doctor/healthy.json",
            lambda b: b["GET https://pubsub.googleapis.com/v1/projects/lab-proj/topics/kick"][
                "body"
            ].update(label="x"),
            "'label' is not a property",
        ),
    ],
)
def test_a_fixture_out_of_shape_fails(rel, break_it, found, documents) -> None:
    """The check is not vacuous: a mutated copy of a fixture is refused, saying where."""
    body = copy.deepcopy(json.loads((FIXTURES / rel).read_text()))
    break_it(body)
    problems = problems_of(rel, body, documents)
    assert any(found in p for p in problems), problems


def test_the_doctor_fixtures_calls_are_methods_of_their_apis(documents) -> None:
    """The URL lookup names the method the doctor calls (the most literal path wins)."""
    doc = document(documents, "pubsub.v1.json")
    base = "https://pubsub.googleapis.com/v1/projects/lab-proj/topics/alerts"
    assert method_at(doc, "GET", base)["id"] == "pubsub.projects.topics.get"
    assert (
        method_at(doc, "GET", base + ":getIamPolicy")["id"] == "pubsub.projects.topics.getIamPolicy"
    )
    with pytest.raises(AssertionError, match="no method"):
        method_at(doc, "DELETE", base + "/nowhere")


# -- Kubernetes Jobs: their counts agree with their index lists ---------------------------


def jobs_in(body: Any) -> Iterator[dict[str, Any]]:
    """The batch/v1 Jobs a Kubernetes fixture holds (a Job, or the items of a JobList)."""
    if isinstance(body, dict) and body.get("kind") == "Job":
        yield body
    for item in body.get("items") or [] if isinstance(body, dict) else []:
        yield from jobs_in(item)


def job_count_problems(job: dict[str, Any]) -> list[str]:
    """An Indexed Job's `succeeded` is the number of its completed indexes (one succeeded pod
    an index); `failed` counts failed pods, retries included, so it is at least the number of
    its failed indexes (each failed index failed at least once)."""
    status, out = job.get("status") or {}, []
    done = intervals.count(status.get("completedIndexes", ""))
    if "completedIndexes" in status and status.get("succeeded", 0) != done:
        out.append(f"succeeded {status.get('succeeded', 0)} != {done} completedIndexes")
    failed = intervals.count(status.get("failedIndexes", ""))
    if "failedIndexes" in status and status.get("failed", 0) < failed:
        out.append(f"failed {status.get('failed', 0)} < {failed} failedIndexes")
    return out


def job_fixture_files() -> list[str]:
    """The Kubernetes fixture files that hold a Job (the pods' files hold none)."""
    return [
        rel
        for rel in fixture_files(KUBERNETES_FOLDERS)
        if list(jobs_in(json.loads((FIXTURES / rel).read_text())))
    ]


@pytest.mark.parametrize("rel", job_fixture_files())
def test_every_kubernetes_job_fixtures_counts_agree_with_its_indexes(rel) -> None:
    body = json.loads((FIXTURES / rel).read_text())
    assert [p for job in jobs_in(body) for p in job_count_problems(job)] == []


def test_the_job_fixtures_are_found_and_a_disagreeing_count_fails() -> None:
    assert job_fixture_files() == ["gke_api/job_indexed_autopilot.json"]
    body = json.loads((FIXTURES / "gke_api/job_indexed_autopilot.json").read_text())
    assert len(list(jobs_in(body))) == 1
    wrong = copy.deepcopy(body)
    wrong["status"]["succeeded"] += 2
    wrong["status"]["failed"] = 1
    problems = job_count_problems(wrong)
    assert any("completedIndexes" in p for p in problems)
    assert any("failedIndexes" in p for p in problems)
