"""Which pods belong to a Job's current generation. Pure: no I/O.

A layer's Job name is deterministic (shared.jobs.layer_spec), so a Job deleted and created
again under the same name (a re-submit, an OOM bump's re-create, a Job deleted with orphan
propagation whose pods linger) shares its `batch.kubernetes.io/job-name` label with the
previous generation's pods. Only `batch.kubernetes.io/controller-uid`, the Job's
`metadata.uid`, which the Job controller stamps on every pod it creates, tells them apart,
so every listing that counts, bills or inspects a layer's pods selects by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

# The label Kubernetes >= 1.27 writes, then the legacy one it still writes beside it.
CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


class NoJobUidError(ValueError):
    """A Job without `metadata.uid` cannot select its pods (only a hand-made Job dict lacks
    it; the API server always sets one)."""


def controller_uid(labels: Mapping[str, str]) -> str:
    """The uid of the Job that created a pod, from its labels ("" when it has none)."""
    return next((labels[k] for k in CONTROLLER_UID_LABELS if labels.get(k)), "")


def pod_selector(job_uid: str, index: int | None = None) -> str:
    """The label selector of the pods of the Job whose `metadata.uid` is `job_uid`, optionally
    of one index. Raises NoJobUidError for an empty uid (it would select every pod)."""
    if not job_uid:
        raise NoJobUidError(
            "a Job's pods are selected by its metadata.uid (batch.kubernetes.io/controller-uid); "
            "this Job has none"
        )
    selector = f"{CONTROLLER_UID_LABELS[0]}={job_uid}"
    return selector if index is None else f"{selector},{INDEX_LABEL}={int(index)}"


def events_of_generation(
    events: Iterable[Mapping[str, Any]],
    other_pod_uids: frozenset[str],
    job_created: datetime | None,
    event_time: Any,
) -> list[Mapping[str, Any]]:
    """Pod events of a Job's current generation: an event about a pod another generation
    created (`other_pod_uids`) is left out, and so is one from before the Job was created
    (a pod gone since, whose uid no listing shows any more, cannot be the new Job's then).
    `event_time(event)` gives an event's time."""
    out = []
    for event in events:
        uid = (event.get("involvedObject") or {}).get("uid", "")
        if uid and uid in other_pod_uids:
            continue
        if job_created is not None and event_time(event) < job_created:
            continue
        out.append(event)
    return out
