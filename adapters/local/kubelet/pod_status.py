"""The pod status the process kubelet writes, as the kubelet's status manager writes it: pure
builders of strategic-merge patches of `status` (conditions merge by `type`, so conditions
others own, such as `DisruptionTarget`, stay).

What the Job controller reads from them: the phase, each container's `state.terminated.exitCode`
(podFailurePolicy's `onExitCodes`), the conditions (`onPodConditions`), `Ready` (`.status.ready`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

HOST_IP = "127.0.0.1"
CONTAINER_ID_SCHEME = "local"  # containerID `local://<pid>`: a process, not a container


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, status: bool, now: datetime, reason: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(now),
    }
    if reason:
        out["reason"] = reason
    return out


def running(
    container: str,
    image: str,
    pid: int | None,
    started: datetime,
    resources: dict[str, Any] | None = None,
    generation: int | None = None,
) -> dict[str, Any]:
    """The patch of a pod whose container has started (Running, Ready). `resources`: the
    container's `resources` as actuated, reported as the kubelet of 1.33+ does for in-place
    resize (`containerStatuses[].resources` and `allocatedResources`, the requests), with the
    pod's `generation` as `observedGeneration` (a resize bumps it)."""
    patch = _running(container, image, pid, started)
    if resources is not None:
        (status,) = patch["status"]["containerStatuses"]
        status["resources"] = resources
        status["allocatedResources"] = dict(resources.get("requests") or {})
    if generation is not None:
        patch["status"]["observedGeneration"] = generation
    return patch


def _running(container: str, image: str, pid: int | None, started: datetime) -> dict[str, Any]:
    return {
        "status": {
            "phase": "Running",
            "hostIP": HOST_IP,
            "hostIPs": [{"ip": HOST_IP}],
            "podIP": HOST_IP,
            "podIPs": [{"ip": HOST_IP}],
            "startTime": rfc3339(started),
            "conditions": [
                _condition("PodReadyToStartContainers", True, started),
                _condition("Initialized", True, started),
                _condition("ContainersReady", True, started),
                _condition("Ready", True, started),
            ],
            "containerStatuses": [
                {
                    "name": container,
                    "image": image,
                    "imageID": "",
                    "containerID": f"{CONTAINER_ID_SCHEME}://{pid or 0}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": rfc3339(started)}},
                }
            ],
        }
    }


def terminated_reason(exit_code: int, oom_killed: bool) -> str:
    """The container runtime's reason: OOMKilled, Completed (0) or Error."""
    if oom_killed:
        return "OOMKilled"
    return "Completed" if exit_code == 0 else "Error"


def terminated(
    container: str,
    image: str,
    pid: int | None,
    exit_code: int,
    *,
    started: datetime | None,
    finished: datetime,
    oom_killed: bool = False,
    message: str = "",
) -> dict[str, Any]:
    """The patch of a pod whose only container has ended (restartPolicy Never): Succeeded on
    exit 0, else Failed; Ready and ContainersReady go False (`mergePodStatus`)."""
    phase = "Succeeded" if exit_code == 0 else "Failed"
    reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    state: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": terminated_reason(exit_code, oom_killed),
        "startedAt": rfc3339(started or finished),
        "finishedAt": rfc3339(finished),
        "containerID": f"{CONTAINER_ID_SCHEME}://{pid or 0}",
    }
    if message:
        state["message"] = message
    return {
        "status": {
            "phase": phase,
            "conditions": [
                _condition("PodReadyToStartContainers", False, finished),
                _condition("ContainersReady", False, finished, reason),
                _condition("Ready", False, finished, reason),
            ],
            "containerStatuses": [
                {
                    "name": container,
                    "image": image,
                    "imageID": "",
                    "containerID": f"{CONTAINER_ID_SCHEME}://{pid or 0}",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"terminated": state},
                }
            ],
        }
    }


def start_failed(container: str, image: str, message: str, now: datetime) -> dict[str, Any]:
    """A container that could not start (its command is missing): Failed with exit 128, as a
    runtime reports `StartError`."""
    patch = terminated(container, image, None, 128, started=now, finished=now, message=message)
    patch["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "StartError"
    return patch


def evicted(message: str, now: datetime) -> dict[str, Any]:
    """The kubelet's own node-pressure eviction: DisruptionTarget (TerminationByKubelet) and
    the pod's `status.reason` Evicted (`pkg/kubelet/eviction`)."""
    return {
        "status": {
            "phase": "Failed",
            "reason": "Evicted",
            "message": message,
            "conditions": [
                {
                    **_condition("DisruptionTarget", True, now, "TerminationByKubelet"),
                    "message": message,
                }
            ],
        }
    }


def pod_uid_precondition(uid: str) -> dict[str, Any]:
    """A DeleteOptions body: grace 0 with a UID precondition (the kubelet's final delete)."""
    return {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": uid},
    }
