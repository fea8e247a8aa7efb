"""Kubernetes API objects (plain dicts) -> the cluster interface's dataclasses. Pure.

Input is the API server's JSON for a Job, Pod or Event, as `GkeCluster` reads it (the response
body, `json.loads`ed, never the client's model classes): the wire form, camelCase keys,
timestamps as ISO-8601 strings (datetime objects are accepted too). Working on dicts keeps this
testable without an API server, cheap at thousands of pods, and independent of the client's
model classes, which change between client releases.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from shared.ports.cluster import (
    ClusterError,
    ClusterUnreachableError,
    JobStatus,
    ManifestRejectedError,
    PodInfo,
)

WORKER_CONTAINER = "worker"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
GIB = 1024**3

# Condition type -> the terminal condition it means. Since Kubernetes 1.31 the Job controller
# first sets FailureTarget (SuccessCriteriaMet) and only sets Failed (Complete) once every pod
# has terminated; the outcome is decided at the first one, and the local cluster reports it
# then too, so the controller sees the same thing from both.
_TERMINAL = (
    ("Failed", "Failed"),
    ("Complete", "Complete"),
    ("FailureTarget", "Failed"),
    ("SuccessCriteriaMet", "Complete"),
)


def parse_time(value: Any) -> datetime | None:
    """An API timestamp as an aware UTC datetime (naive input is taken to be UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        stamp = value
    else:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


def parse_quantity(quantity: Any) -> Any:
    """A Kubernetes quantity as a Decimal, by the client's own parser (exact arithmetic, every
    SI and binary suffix). Imported on first use: the operator CLI sorts events with this
    module without the `kubernetes` package (the `controller` extra)."""
    from kubernetes.utils.quantity import parse_quantity as parse

    return parse(quantity)


def cpu_cores(quantity: Any) -> float:
    """A CPU quantity ("250m", "1", 0.5) in vCPU."""
    return float(parse_quantity(quantity))


def memory_gib(quantity: Any) -> float:
    """A memory quantity ("512Mi", "2Gi", "1G", bytes) in GiB."""
    return float(parse_quantity(quantity) / GIB)


def label_selector(labels: Mapping[str, str]) -> str:
    """`k1=v1,k2=v2`: equality on every label (an empty selector matches everything)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


# The Job controller's finalizer on every pod it creates: it removes it once it has counted
# the pod, and only while it syncs the Job (a suspended Job's condemned pods can keep it).
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
# A collection delete that spares terminal pods: a Failed pod is the only record of why its
# index died (`pipeline inspect` reads it) and holds no node; a Succeeded one counts as done.
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def sweep_selector(job_selector: str, scope: Mapping[str, str] | None) -> str:
    """The label selector of a sweep of one Job's pods (`job_selector`, by its uid) narrowed
    to `scope` (the run's graph label): a sweep never reaches another graph's pods, whatever
    the Job selector matches. ValueError for an empty `job_selector` (it would select every
    pod of the namespace)."""
    if not job_selector:
        raise ValueError("a pod sweep needs the Job's selector; an empty one selects every pod")
    return ",".join(filter(None, (job_selector, label_selector(scope or {}))))


def releasable(pod: Mapping[str, Any]) -> bool:
    """Whether a pod (wire form) is condemned and held only by the Job controller's tracking
    finalizer: being deleted, not Succeeded (its finalizer is how its completion is counted),
    and carrying `batch.kubernetes.io/job-tracking`. Such a pod of a suspended Job can stay
    for good, since the Job controller clears the finalizer only while it syncs the Job."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return (
        bool(meta.get("deletionTimestamp"))
        and phase != "Succeeded"
        and JOB_TRACKING_FINALIZER in (meta.get("finalizers") or [])
    )


def suspension_pending(job: Mapping[str, Any]) -> bool:
    """Whether a Job (wire form) is suspended in its spec but not yet marked so by the Job
    controller (no Suspended condition True): a running, unfinished Job's controller may still
    be acting on its older spec."""
    conditions = (job.get("status") or {}).get("conditions") or []
    return (
        bool((job.get("spec") or {}).get("suspend"))
        and _true_condition(conditions, "Suspended") is None
        and not any(_true_condition(conditions, kind) for kind, _ in _TERMINAL)
    )


def _true_condition(conditions: Iterable[Mapping[str, Any]], kind: str) -> Mapping | None:
    for cond in conditions:
        if cond.get("type") == kind and str(cond.get("status")) == "True":
            return cond
    return None


def job_status(job: Mapping[str, Any]) -> JobStatus:
    """A batch/v1 Job dict as `JobStatus` (missing counts are 0, missing strings empty)."""
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    conditions = status.get("conditions") or []
    condition = reason = None
    for kind, meaning in _TERMINAL:
        found = _true_condition(conditions, kind)
        if found is not None:
            condition, reason = meaning, found.get("reason") or None
            break
    suspended = bool(spec.get("suspend"))
    if condition is None and suspended:
        # As the local cluster reports it; Kubernetes adds this condition once the Job
        # controller has seen the suspension, so fall back to spec.suspend's word for it.
        found = _true_condition(conditions, "Suspended")
        condition = "Suspended"
        reason = (found or {}).get("reason") or "JobSuspended"
    return JobStatus(
        name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        # API defaults: both are 1 when unset.
        completions=int(spec.get("completions") if spec.get("completions") is not None else 1),
        parallelism=int(spec.get("parallelism") if spec.get("parallelism") is not None else 1),
        suspended=suspended,
        active=int(status.get("active") or 0),
        ready=int(status.get("ready") or 0),
        succeeded=int(status.get("succeeded") or 0),
        failed=int(status.get("failed") or 0),
        completed_indexes=status.get("completedIndexes") or "",
        failed_indexes=status.get("failedIndexes") or "",
        condition=condition,
        reason=reason,
        start_time=parse_time(status.get("startTime")),
        completion_time=parse_time(status.get("completionTime")),
        created=parse_time(meta.get("creationTimestamp")),
        uid=meta.get("uid", ""),
    )


def _container_status(status: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    statuses = status.get("containerStatuses") or []
    for cs in statuses:
        if cs.get("name") == name:
            return cs
    # Images that bring their own entry point may name the container otherwise.
    return statuses[0] if statuses else {}


def _requests(spec: Mapping[str, Any]) -> tuple[float, float]:
    """Sum of the containers' requests (as Autopilot bills them; it writes its defaults and
    rounding into the pod spec, so the pod shows what is charged)."""
    cpu = mem = 0.0
    for container in spec.get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        if requests.get("cpu") is not None:
            cpu += cpu_cores(requests["cpu"])
        if requests.get("memory") is not None:
            mem += memory_gib(requests["memory"])
    return cpu, mem


def _pod_reason(status: Mapping[str, Any], state: Mapping[str, Any]) -> str | None:
    """Why the pod is where it is, most telling first: preemption/eviction (DisruptionTarget,
    which the Job's podFailurePolicy ignores) beats the container's own exit reason."""
    conditions = status.get("conditions") or []
    if _true_condition(conditions, "DisruptionTarget") is not None:
        return "DisruptionTarget"
    terminated, waiting = state.get("terminated") or {}, state.get("waiting") or {}
    if terminated.get("reason"):
        return terminated["reason"]  # Completed, Error, OOMKilled, ...
    if status.get("reason"):
        return status["reason"]  # Evicted, NodeShutdown, ...
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and str(cond.get("status")) == "False":
            # The scheduler's event reason, as the local cluster names it.
            return (
                "FailedScheduling" if cond.get("reason") == "Unschedulable" else cond.get("reason")
            )
    return waiting.get("reason") or None  # ContainerCreating, ErrImagePull, ...


def pod_info(pod: Mapping[str, Any], container: str = WORKER_CONTAINER) -> PodInfo:
    """A v1 Pod dict of an Indexed Job as `PodInfo` (exit code from `container`)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    labels = dict(meta.get("labels") or {})
    annotations = meta.get("annotations") or {}
    raw_index = annotations.get(INDEX_KEY, labels.get(INDEX_KEY))
    state = _container_status(status, container).get("state") or {}
    terminated = state.get("terminated") or {}
    cpu, mem = _requests(spec)
    disruption = _true_condition(status.get("conditions") or [], "DisruptionTarget") or {}
    return PodInfo(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        job_name=next((labels[k] for k in JOB_NAME_LABELS if labels.get(k)), ""),
        index=int(raw_index) if raw_index not in (None, "") else -1,
        phase=status.get("phase") or "Pending",
        cpu_request=cpu,
        memory_request_gib=mem,
        created=parse_time(meta.get("creationTimestamp")),
        # Bound and acknowledged by the kubelet: image pulls count, as they are billed.
        started=parse_time(status.get("startTime")),
        finished=parse_time(terminated.get("finishedAt")),
        exit_code=int(terminated["exitCode"]) if terminated.get("exitCode") is not None else None,
        reason=_pod_reason(status, state),
        node=spec.get("nodeName") or "",
        labels=labels,
        # A kubelet's node-pressure eviction and a Spot node's shutdown share the condition's
        # reason (TerminationByKubelet); status.reason tells them apart
        # (shared.reconcile.evictions).
        disruption_reason=disruption.get("reason") or None,
        status_reason=status.get("reason") or None,
    )


def event_time(event: Mapping[str, Any]) -> datetime:
    """When an event last happened (series, legacy and new-style events alike); a field that
    is absent or not ISO 8601 passes to the next."""
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        try:
            stamp = parse_time(value)
        except ValueError:
            continue
        if stamp is not None:
            return stamp
    return datetime.min.replace(tzinfo=UTC)


def sort_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events oldest first (the API lists them in no promised order)."""
    return [dict(e) for e in sorted(events, key=event_time)]


def status_message(body: str | bytes | None, fallback: str = "") -> str:
    """The API server's words from a `Status` error body: its message, then each cause's
    field and message (the field is what the config must fix). `fallback` if not a Status."""
    try:
        status = json.loads(body) if body else None
    except (TypeError, ValueError):
        status = None
    if not isinstance(status, dict):
        text = body.decode(errors="replace") if isinstance(body, bytes) else (body or "")
        return text.strip()[:500] or fallback
    parts = [status.get("message") or status.get("reason") or fallback]
    for cause in (status.get("details") or {}).get("causes") or []:
        field, message = cause.get("field"), cause.get("message") or cause.get("reason", "")
        if field and field not in parts[0]:  # the message usually names the field already
            parts.append(f"{field}: {message}")
    return "; ".join(p for p in parts if p)


def schema_errors(errors: Iterable[Mapping[str, Any]]) -> str:
    """pydantic's errors as `field.path: message` (the client checks a manifest against its
    models before sending it); the call's argument position is left out of the path."""
    out = []
    for err in errors:
        loc = list(err.get("loc") or ())
        path = loc[1:] if loc and isinstance(loc[0], int) else loc
        out.append(".".join(map(str, path)) + f": {err.get('msg')}")
    return "; ".join(out)


def api_error(
    status: int | None, body: str | bytes | None, action: str, endpoint: str
) -> ClusterError:
    """The interface's error for an API server's HTTP answer (`status` 0: no answer at all).

    Transient (`ClusterUnreachableError`: the caller retries on its next trigger) for no answer,
    timeouts, throttling, conflicts and server errors; `ManifestRejectedError` for an invalid
    request (permanent until the config is fixed); `ClusterError` for auth and the rest.
    """
    code = status or 0
    said = status_message(body)
    what = f"{action}: {said}" if said else action
    if code == 0:
        return ClusterUnreachableError(
            f"{what}: no answer from the API server at {endpoint}; check the endpoint, the CA "
            "and the network path (authorized networks, private endpoint)"
        )
    if code in (400, 422):
        return ManifestRejectedError(f"{what} (HTTP {code}): fix the field named above")
    if code == 401:
        return ClusterError(
            f"{what} (HTTP 401): the bearer token is invalid or expired; check the credentials "
            "(the function's service account, or `gcloud auth login` for a kubeconfig)"
        )
    if code == 403:
        return ClusterError(
            f"{what} (HTTP 403): the credentials lack permission (IAM container.* permissions, "
            "e.g. roles/container.developer, or RBAC in the namespace); check the function's "
            "service account"
        )
    if code == 404:
        return ClusterError(f"{what} (HTTP 404): not found; check the name and the namespace")
    if code == 409:
        return ClusterUnreachableError(f"{what} (HTTP 409): a concurrent change; retry")
    if code in (408, 410, 429) or code >= 500:  # 410: a list's continue token expired
        return ClusterUnreachableError(
            f"{what} (HTTP {code}): the API server at {endpoint} is busy or unavailable; "
            "retry later"
        )
    return ClusterError(f"{what} (HTTP {code})")
