"""shared.reconcile.node_oom: a node's OOMKilling event (node-problem-detector's kernel
monitor) read and matched to the pod its OOM killer ended. The events below are written by
hand in the shape the monitor posts (reason, involvedObject kind Node, source kernel-monitor,
the kernel's "Killed process" line as the message)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from shared.reconcile.node_oom import (
    NodeOomKill,
    event_time,
    may_be_node_oom,
    node_oom_victims,
    parse_node_oom,
)

T0 = datetime(2026, 3, 2, 14, 5, tzinfo=UTC)
NODE = "gk3-lab-cluster-nap-1q2w3e4r-5t6y7u8i-x9z8"
KERNEL = (
    "Out of memory: Killed process 4242 (python) total-vm:9245440kB, anon-rss:8123456kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:16384kB oom_score_adj:936"
)


def _event(**over) -> dict:
    event = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": f"{NODE}.17f0", "namespace": "default"},
        "type": "Warning",
        "reason": "OOMKilling",
        "message": KERNEL,
        "involvedObject": {"kind": "Node", "name": NODE, "uid": NODE},
        "source": {"component": "kernel-monitor", "host": NODE},
        "lastTimestamp": "2026-03-02T14:05:00Z",
    }
    return {**event, **over}


@pytest.mark.parametrize(
    ("event", "kill"),
    [
        (_event(), NodeOomKill(NODE, T0, 4242, "python")),
        (
            _event(message="Memory cgroup out of memory: Killed process 7 (pcg) total-vm:1kB"),
            NodeOomKill(NODE, T0, 7, "pcg"),
        ),
        (_event(message="oom"), NodeOomKill(NODE, T0)),  # no kernel line: node and time
        (_event(reason="NodeHasSufficientMemory"), None),
        # the container's OOM is the pod's status, not a Node event
        (_event(involvedObject={"kind": "Pod", "name": "p"}), None),
        (_event(lastTimestamp=None), None),  # no time: nothing to match
        (
            _event(involvedObject={"kind": "Node"}),  # the name from the reporting host
            NodeOomKill(NODE, T0, 4242, "python"),
        ),
    ],
)
def test_parse_node_oom(event, kill):
    assert parse_node_oom(event) == kill


@pytest.mark.parametrize(
    ("event", "at"),
    [
        ({"lastTimestamp": "2026-03-02T14:05:00Z"}, T0),
        ({"series": {"lastObservedTime": "2026-03-02T14:05:00.000000Z"}}, T0),
        ({"eventTime": "2026-03-02T14:05:00Z", "lastTimestamp": None}, T0),
        ({"lastTimestamp": "garbage", "firstTimestamp": "2026-03-02T14:05:00"}, T0),  # naive
        ({}, None),
    ],
)
def test_event_time(event, at):
    assert event_time(event) == at


@dataclass(frozen=True)
class _Pod:
    uid: str
    phase: str = "Failed"
    exit_code: int | None = 137
    reason: str | None = "Error"
    node: str = NODE
    finished: datetime | None = T0 + timedelta(seconds=3)
    disruption_reason: str | None = None
    status_reason: str | None = None


KILL = NodeOomKill(NODE, T0, 4242, "python")


@pytest.mark.parametrize(
    ("pod", "victim"),
    [
        (_Pod("a"), True),
        (_Pod("a", finished=T0 - timedelta(seconds=60)), True),  # the window's edge
        (_Pod("a", finished=T0 + timedelta(seconds=61)), False),  # another cause, later
        (_Pod("a", node="another-node"), False),
        (_Pod("a", exit_code=1), False),  # not SIGKILLed
        (_Pod("a", reason="OOMKilled"), False),  # the container's scope, counted there
        (_Pod("a", phase="Running", exit_code=None), False),
        (_Pod("a", finished=None), False),
        # a kubelet eviction on the short node is an eviction (counted there), not an OOM kill
        (_Pod("a", reason="DisruptionTarget", disruption_reason="TerminationByKubelet"), False),
        (_Pod("a", status_reason="Evicted"), False),
    ],
)
def test_node_oom_victims(pod, victim):
    assert (node_oom_victims([pod], [KILL]) == {"a"}) is victim


def test_no_kills_no_victims_and_which_pods_are_worth_reading_events_for():
    assert node_oom_victims([_Pod("a")], []) == set()
    assert may_be_node_oom(_Pod("a"))
    assert not may_be_node_oom(_Pod("a", reason="OOMKilled"))
    assert not may_be_node_oom(_Pod("a", exit_code=0, phase="Succeeded"))
