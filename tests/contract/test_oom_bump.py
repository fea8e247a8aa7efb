"""The OOM bump through the controller and the operator's `pipeline submit`, on the Firestore
emulator: OOM kills of a layer's pods are counted and alerted once, and the re-submitted
layer's Job asks for `job.oom_memory_factor` times the memory (snapped to Autopilot)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.ports.cluster import PodInfo
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import DEMO, NOW


class OomCluster(RecordingCluster):
    """Every pod of a Job in `oom` was OOM-killed (exit 137)."""

    def __init__(self, reason: str = "OOMKilled") -> None:
        super().__init__()
        self.oom: set[str] = set()
        self.reason = reason  # "Error": the node's OOM killer (SIGKILL, no OOMKilled)
        self.node_events: list[dict[str, Any]] = []

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        if job_name not in self.oom:
            return []
        return [
            PodInfo(
                f"{job_name}-{i}-x",
                f"{job_name}-u{i}",
                job_name,
                i,
                "Failed",
                1.0,
                1.0,
                created=NOW,
                started=NOW,
                finished=NOW + timedelta(seconds=30),
                exit_code=137,
                reason=self.reason,
                node="node-a",
            )
            for i in (0, 1)
            if index is None or index == i
        ]


def memory_gib(manifest: dict[str, Any]) -> float:
    raw = manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"]
    assert raw.endswith("Mi") or raw.endswith("Gi"), raw
    return float(raw[:-2]) / (1024 if raw.endswith("Mi") else 1)


@pytest.mark.parametrize("factor", [1.5, None])
def test_oom_kills_raise_the_next_attempts_memory(store, cli, factor):
    cfg = load_config(DEMO)
    cfg = cfg.model_copy(update={"job": cfg.job.model_copy(update={"oom_memory_factor": factor})})
    run = new_run(cfg, "r-oom", ["ingest"], "auto", NOW)
    run.setups.clear()  # layer 2 is what this test watches
    store.create_run(run)
    cluster = OomCluster()
    published: list[tuple[str, dict[str, Any]]] = []
    controller = Controller(
        store, cluster, lambda k, b: published.append((k, b)), clock=lambda: NOW
    )

    controller.reconcile("r-oom")
    first = store.load_run("r-oom").layers["ingest-L2"].job.name
    before = memory_gib(cluster.manifests[first])
    cluster.oom.add(first)
    cluster.finish(first, condition="Failed", reason="FailedIndexes", failed_indexes="0,1")
    controller.reconcile("r-oom")
    ls = store.load_run("r-oom").layers["ingest-L2"]
    assert (ls.phase, ls.faults.oom_killed) == ("failed", 2)
    [oom] = [b for k, b in published if k == "oom_killed"]
    assert oom["pods"] == 2 and oom["memory_request_gib"] == pytest.approx(before)

    result = cli("submit", "r-oom", "ingest", "2")  # the operator's re-submit
    assert result.exit_code == 0, result.output
    controller.reconcile("r-oom")
    second = store.load_run("r-oom").layers["ingest-L2"].job.name
    assert second != first
    after = memory_gib(cluster.manifests[second])
    if factor is None:
        assert after == pytest.approx(before)  # off: the same request again
    else:
        assert after >= before * factor  # snapped up to Autopilot's grid, never down
        assert after < before * factor + 1.0
    controller.reconcile("r-oom")
    assert [k for k, _ in published].count("oom_killed") == 1


def _node_oom_event(node: str, at: str) -> dict[str, Any]:
    """By hand, in the shape node-problem-detector's kernel monitor posts."""
    return {
        "kind": "Event",
        "reason": "OOMKilling",
        "type": "Warning",
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "source": {"component": "kernel-monitor", "host": node},
        "message": "Out of memory: Killed process 4242 (python) total-vm:9245440kB",
        "lastTimestamp": at,
    }


@pytest.mark.parametrize(
    ("node", "counted"),
    [("node-a", 2), ("node-b", 0)],  # the pods' node, and an OOM on another node
)
def test_the_nodes_oom_kills_count_beside_the_containers(store, node, counted):
    cfg = load_config(DEMO)
    run = new_run(cfg, "r-node-oom", ["ingest"], "auto", NOW)
    run.setups.clear()
    store.create_run(run)
    cluster = OomCluster(reason="Error")  # SIGKILLed: the runtime says no OOMKilled
    published: list[tuple[str, dict[str, Any]]] = []
    controller = Controller(
        store, cluster, lambda k, b: published.append((k, b)), clock=lambda: NOW
    )
    controller.reconcile("r-node-oom")
    first = store.load_run("r-node-oom").layers["ingest-L2"].job.name
    cluster.oom.add(first)
    killed_at = (NOW + timedelta(seconds=28)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.node_events = [_node_oom_event(node, killed_at)]
    cluster.finish(first, condition="Failed", reason="FailedIndexes", failed_indexes="0,1")
    controller.reconcile("r-node-oom")
    ls = store.load_run("r-node-oom").layers["ingest-L2"]
    assert (ls.faults.oom_killed, ls.faults.node_oom_killed) == (counted, counted)
    alerts = [b for k, b in published if k == "oom_killed"]
    if not counted:
        assert alerts == []
        return
    [oom] = alerts
    assert (oom["node_oom_kills"], oom["container_oom_kills"]) == (2, 0)
    assert "job.resources.memory" in oom["fix"] and oom["levers"]
