"""Out-of-memory kills at the node's scope: the kernel's OOM killer ending a pod's process
because the node, not the container's limit, ran out of memory. Pure: no I/O.

Our pods have no memory limit (requests only, so they may burst), so a pod that bursts past
what its node has left is ended by the node's OOM killer. The container then ends killed by
SIGKILL (exit 137) and the runtime may report `Error`, not `OOMKilled`; the evidence is the
Node's event that node-problem-detector's kernel monitor posts (GKE runs it on every node):

    {"kind": "Event", "type": "Warning", "reason": "OOMKilling",
     "involvedObject": {"kind": "Node", "name": "gk3-...-abcd", "uid": "gk3-...-abcd"},
     "source": {"component": "kernel-monitor", "host": "gk3-...-abcd"},
     "message": "Out of memory: Killed process 4242 (python) total-vm:..., anon-rss:..."}

(the kernel's line, matched by the monitor's rule `Killed process \\d+ (.+) total-vm:...`;
"Memory cgroup out of memory: Killed process ..." for a cgroup's). The event names the node
and the time, not the pod, so a pod counts as node-OOM-killed when it ended by SIGKILL on that
node within `MATCH_WINDOW_S` of the event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

NODE_OOM_REASON = "OOMKilling"  # node-problem-detector's kernel monitor
SIGKILL_EXIT = 137  # 128 + SIGKILL: how the OOM killer's victim ends
# The kubelet notices a container's end within a few seconds of the kill, and the event's
# time is the monitor's reading of the kernel log: a minute covers both without pairing a
# kill with a pod that died of something else on the node much later.
MATCH_WINDOW_S = 60.0
_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")


class OomScope(Enum):
    """Which OOM killer ended a pod: its container's limit (`OOMKilled`) or the node's."""

    CONTAINER = "container"
    NODE = "node"


@dataclass(frozen=True)
class NodeOomKill:
    """One `OOMKilling` event of a node: where, when and which process, as the kernel said."""

    node: str
    at: datetime
    pid: int | None = None
    process: str = ""


def event_time(event: Mapping[str, Any]) -> datetime | None:
    """When an event last happened: `series.lastObservedTime`, `lastTimestamp`, `eventTime`,
    `firstTimestamp`, then its creation (the recorders fill different ones); None if none
    reads as ISO 8601."""
    for value in (
        (event.get("series") or {}).get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        try:
            stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
        except ValueError:
            continue
        if stamp is not None:
            return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
    return None


def parse_node_oom(event: Mapping[str, Any]) -> NodeOomKill | None:
    """The node OOM kill an event reports, or None for any other event (another reason, or
    an `OOMKilling` about something that is not a Node)."""
    involved = event.get("involvedObject") or {}
    if event.get("reason") != NODE_OOM_REASON or involved.get("kind") != "Node":
        return None
    node = involved.get("name") or (event.get("source") or {}).get("host") or ""
    at = event_time(event)
    if not node or at is None:
        return None
    found = _KILLED.search(str(event.get("message") or ""))
    return NodeOomKill(
        node=node,
        at=at,
        pid=int(found.group(1)) if found else None,
        process=found.group(2) if found else "",
    )


def node_oom_victims(
    pods: Iterable[Any], kills: Iterable[NodeOomKill], window_s: float = MATCH_WINDOW_S
) -> set[str]:
    """The uids of `pods` (PodInfo-like: uid, phase, node, exit_code, reason, finished) that
    a node's OOM killer ended: failed by SIGKILL on a node with an `OOMKilling` event within
    `window_s` of their end. A pod the runtime already reported `OOMKilled` is the container
    scope's and not counted again."""
    by_node: dict[str, list[datetime]] = {}
    for kill in kills:
        by_node.setdefault(kill.node, []).append(kill.at)
    window = timedelta(seconds=window_s)
    out = set()
    for pod in pods:
        if not may_be_node_oom(pod) or pod.finished is None or not pod.node:
            continue
        if any(abs(pod.finished - at) <= window for at in by_node.get(pod.node, ())):
            out.add(pod.uid)
    return out


def may_be_node_oom(pod: Any) -> bool:
    """Whether a pod's end could be a node OOM kill (so the node events are worth reading):
    failed by SIGKILL, not reported `OOMKilled` (the container's scope), and not disrupted (a
    kubelet eviction or a preemption also ends in SIGKILL on a node short of memory, and is
    counted as such: shared.reconcile.evictions)."""
    return (
        pod.phase == "Failed"
        and pod.exit_code == SIGKILL_EXIT
        and pod.reason not in ("OOMKilled", "DisruptionTarget")
        and not getattr(pod, "disruption_reason", None)
        and getattr(pod, "status_reason", None) != "Evicted"
    )
