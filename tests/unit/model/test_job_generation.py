"""shared.model.job_generation: a Job's pods and pod events are its own generation's, told
apart from an earlier Job of the same name by `batch.kubernetes.io/controller-uid`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.model.job_generation import (
    NoJobUidError,
    controller_uid,
    events_of_generation,
    pod_selector,
)

NEW, OLD = "uid-new", "uid-old"
T0 = datetime(2026, 1, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("labels", "uid"),
    [
        ({"batch.kubernetes.io/controller-uid": NEW, "controller-uid": NEW}, NEW),
        ({"batch.kubernetes.io/controller-uid": NEW}, NEW),
        ({"controller-uid": OLD}, OLD),  # the legacy label alone (Kubernetes < 1.27)
        ({"batch.kubernetes.io/job-name": "j"}, ""),  # a name is no generation
        ({}, ""),
    ],
)
def test_controller_uid_of_a_pod(labels, uid):
    assert controller_uid(labels) == uid


@pytest.mark.parametrize(
    ("uid", "index", "selector"),
    [
        (NEW, None, "batch.kubernetes.io/controller-uid=uid-new"),
        (
            NEW,
            3,
            "batch.kubernetes.io/controller-uid=uid-new,batch.kubernetes.io/job-completion-index=3",
        ),
        (
            NEW,
            0,
            "batch.kubernetes.io/controller-uid=uid-new,batch.kubernetes.io/job-completion-index=0",
        ),
    ],
)
def test_pod_selector(uid, index, selector):
    assert pod_selector(uid, index) == selector


def test_an_empty_uid_selects_nothing_rather_than_everything():
    with pytest.raises(NoJobUidError, match="metadata.uid"):
        pod_selector("")


def _event(pod: str, at: datetime, uid: str = "") -> dict:
    """A pod event written by hand: only the fields the filter reads (involvedObject, a time)."""
    return {"involvedObject": {"kind": "Pod", "name": pod, "uid": uid}, "at": at}


@pytest.mark.parametrize(
    ("event", "kept"),
    [
        (_event("j-0-a", T0, "p-new"), True),
        (_event("j-0-b", T0, "p-orphan"), False),  # a listed pod of the earlier Job
        (_event("j-0-c", T0.replace(hour=9), "p-gone"), False),  # before the Job existed
        (_event("j-0-d", T0.replace(hour=9)), False),
        (_event("j-0-e", T0.replace(hour=11)), True),  # no uid on the event: by its time
    ],
)
def test_events_of_generation(event, kept):
    got = events_of_generation([event], frozenset({"p-orphan"}), T0, lambda e: e["at"])
    assert (got == [event]) is kept


def test_events_without_a_creation_time_are_kept_unless_another_generations():
    events = [_event("a", T0, "p-new"), _event("b", T0, "p-orphan")]
    got = events_of_generation(events, frozenset({"p-orphan"}), None, lambda e: e["at"])
    assert got == events[:1]
