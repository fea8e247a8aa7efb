"""The controller runs a stage's setup pass on the Firestore emulator: the setup Job (and the
run's dataset ConfigMap) before layer 2, layer 2 once the setup completed with graph metadata
that fits the grid, and a failed setup alerted once with the pod's log tail."""

from __future__ import annotations

from typing import Any

import pytest

from shared.build_plan import new_run
from shared.cluster import PodInfo
from shared.config import load_config
from shared.controller import Controller
from shared.graph_meta import GraphMeta, report_line
from shared.layers import layer_count
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import DEMO, NOW


class SetupPodCluster(RecordingCluster):
    """The recording fake with one pod per Job index and a log the test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: dict[str, str] = {}

    def list_pods(self, job_name: str, index: int | None = None) -> list[PodInfo]:
        job = self.jobs.get(job_name)
        if job is None or index is None:
            return []
        phase = "Succeeded" if job.condition == "Complete" else "Failed"
        return [PodInfo(f"{job_name}-0-x", "u0", job_name, 0, phase, 0.25, 1.0)]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        return self.logs.get(pod_name.rsplit("-0-x", 1)[0], "")


@pytest.fixture
def setup_run(store):
    cfg = load_config(DEMO)
    state = new_run(cfg, "r1", ["ingest"], "auto", NOW)
    store.create_run(state)
    return cfg


def _controller(store, cluster) -> tuple[Controller, list[tuple[str, dict[str, Any]]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    return Controller(store, cluster, lambda k, b: out.append((k, b)), clock=lambda: NOW), out


def _report(cfg, size) -> str:
    chunk = tuple(cfg.ds.graph_config.CHUNK_SIZE)
    l2 = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
    return report_line(GraphMeta((0, 0, 0), tuple(size), chunk, layer_count(l2)))


def test_the_setup_job_runs_first_and_layer_2_after_it(store, setup_run):
    cluster = SetupPodCluster()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")
    state = store.load_run("r1")
    name = state.setups["ingest"].job_name
    assert cluster.creates == [name] and state.layers["ingest-L2"].phase == "waiting"
    [config_map] = cluster.config_maps.values()  # the dataset file, before the setup Job
    assert "dataset.yml" in config_map["data"]
    assert store.run_for_job(name) == "r1"  # its Job events reach this run
    controller.reconcile("r1")  # running: nothing new
    assert cluster.creates == [name]
    cluster.logs[name] = "starting\n" + _report(setup_run, setup_run.ds.data_source.size)
    cluster.finish(name, condition="Complete", completed_indexes="0", completion_time=NOW)
    controller.reconcile("r1")
    state = store.load_run("r1")
    assert state.setups["ingest"].phase == "succeeded"
    assert state.layers["ingest-L2"].phase == "running"
    assert cluster.creates == [name, state.layers["ingest-L2"].job_name]
    assert published == []


def test_a_failed_setup_alerts_once_with_its_log_tail(store, setup_run):
    cluster = SetupPodCluster()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")
    name = store.load_run("r1").setups["ingest"].job_name
    cluster.logs[name] = "Traceback: table exists"
    cluster.finish(name, condition="Failed", reason="FailedIndexes", failed_indexes="0")
    controller.reconcile("r1")
    controller.reconcile("r1")
    [(kind, body)] = published
    assert kind == "setup_failed" and body["stage"] == "ingest" and body["job"] == name
    assert body["log_tail"] == "Traceback: table exists"
    assert "pipeline submit r1 ingest 0" in body["fix"]
    assert store.load_run("r1").layers["ingest-L2"].phase == "waiting"


def test_graph_metadata_for_another_grid_refuses_the_stage(store, setup_run):
    cluster = SetupPodCluster()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")
    name = store.load_run("r1").setups["ingest"].job_name
    wrong = [2 * s for s in setup_run.ds.data_source.size]
    cluster.logs[name] = _report(setup_run, wrong)
    cluster.finish(name, condition="Complete", completed_indexes="0", completion_time=NOW)
    controller.reconcile("r1")
    state = store.load_run("r1")
    assert state.setups["ingest"].phase == "failed"
    assert state.layers["ingest-L2"].phase == "waiting" and len(cluster.creates) == 1
    [(kind, body)] = published
    assert kind == "setup_failed" and "planned by the controller" in body["reason"]
