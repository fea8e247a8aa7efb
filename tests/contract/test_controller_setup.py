"""The controller runs a stage's setup pass on the Firestore and Bigtable emulators: the setup
Job (and the run's dataset ConfigMap) before layer 2, layer 2 once the setup completed with the
graph's metadata in its table, fitting the grid; a failed setup alerted once with the pod's log
tail; an image's ingest setup refused on a table that exists without metadata
(docs/setup-passes.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from adapters.bigtable.chunk_ledger import (
    close_bigtable_client,
    ensure_table,
    open_bigtable_client,
)
from adapters.bigtable.graph_meta_store import BigtableGraphTables, write_graph_meta
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.jobs.graph_probe import PROBE_SOURCE
from shared.model.graph_meta import GraphMeta, report_line
from shared.model.layers import layer_count
from shared.operate.operator_actions import resubmit
from shared.ports.cluster import PodInfo
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import DEMO, NOW


class SetupPodCluster(RecordingCluster):
    """The recording fake with one pod per Job index and a log the test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: dict[str, str] = {}

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        job = self.jobs.get(job_name)
        if job is None or index is None:
            return []
        phase = "Succeeded" if job.condition == "Complete" else "Failed"
        return [PodInfo(f"{job_name}-0-x", "u0", job_name, 0, phase, 0.25, 1.0)]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        return self.logs.get(pod_name.rsplit("-0-x", 1)[0], "")


def _demo_config(**update):
    """The demo's config on an instance of its own (the emulator is shared by the session)."""
    cfg = load_config(DEMO)
    bigtable = cfg.bigtable.model_copy(update={"instance": f"i-{uuid.uuid4().hex[:8]}"})
    return cfg.model_copy(update={"bigtable": bigtable, **update})


@pytest.fixture
def setup_run(store, emulators):
    cfg = _demo_config()
    state = new_run(cfg, "r1", ["ingest"], "auto", NOW)
    store.create_run(state)
    return cfg


def _controller(store, cluster) -> tuple[Controller, list[tuple[str, dict[str, Any]]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    controller = Controller(
        store,
        cluster,
        lambda k, b: out.append((k, b)),
        clock=lambda: NOW,
        graph_tables=BigtableGraphTables(),
    )
    return controller, out


def _meta(cfg, size) -> GraphMeta:
    chunk = tuple(cfg.ds.graph_config.CHUNK_SIZE)
    l2 = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
    return GraphMeta((0, 0, 0), tuple(size), chunk, layer_count(l2))


def _report(cfg, size) -> str:
    return report_line(_meta(cfg, size))


def _set_up_graph(cfg, size) -> None:
    """What the demo's setup pod leaves: the table with the graph's metadata."""
    bt = cfg.bigtable
    client = open_bigtable_client(
        cfg.graph_id, bt.project, bt.instance, timedelta(seconds=60), create=True
    )
    try:
        write_graph_meta(client, _meta(cfg, size))
    finally:
        close_bigtable_client(client)


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
    controller.reconcile("r1")  # completed, but the table holds no graph yet
    state = store.load_run("r1")
    assert state.setups["ingest"].phase == "failed"
    assert "does not exist" in state.setups["ingest"].failure_reason
    [(kind, body)] = published
    assert kind == "setup_failed" and "pipeline submit r1 ingest 0" in body["fix"]
    published.clear()
    _set_up_graph(setup_run, setup_run.ds.data_source.size)
    store.update_run("r1", lambda run: resubmit(run, "ingest", 0, "op", NOW))
    controller.reconcile("r1")
    name = store.load_run("r1").setups["ingest"].job_name
    cluster.finish(name, condition="Complete", completed_indexes="0", completion_time=NOW)
    controller.reconcile("r1")
    state = store.load_run("r1")
    assert state.setups["ingest"].phase == "succeeded"
    assert state.layers["ingest-L2"].phase == "running"
    assert cluster.creates[-2:] == [name, state.layers["ingest-L2"].job.name]
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
    _set_up_graph(setup_run, wrong)  # read from the table: no line in the log needed
    cluster.finish(name, condition="Complete", completed_indexes="0", completion_time=NOW)
    controller.reconcile("r1")
    state = store.load_run("r1")
    assert state.setups["ingest"].phase == "failed"
    assert state.layers["ingest-L2"].phase == "waiting" and len(cluster.creates) == 1
    [(kind, body)] = published
    assert kind == "setup_failed" and "planned by the controller" in body["reason"]


def test_an_images_ingest_setup_is_refused_on_a_table_without_metadata(store, emulators):
    """An empty table (e.g. made by an older `pipeline setup`) would make PyChunkedGraph's
    ingest setup fail, or with --exist-ok skip writing the graph: refused before any Job."""
    cfg = _demo_config(commands={"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]})
    store.create_run(new_run(cfg, "r1", ["ingest"], "auto", NOW))
    ensure_table(cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance)
    cluster = SetupPodCluster()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")
    controller.reconcile("r1")
    state = store.load_run("r1")
    assert cluster.creates == [] and state.setups["ingest"].phase == "failed"
    assert "exists without graph metadata" in state.setups["ingest"].failure_reason
    [(kind, body)] = published
    bt = cfg.bigtable
    assert kind == "setup_failed" and body["fix"] == (
        f"delete the empty table (`cbt -project {bt.project} -instance {bt.instance} "
        "deletetable demo`), then `pipeline submit r1 ingest 0`"
    )


@pytest.mark.parametrize(("set_up", "exist_ok"), [(False, False), (True, True)])
def test_an_images_ingest_setup_gets_exist_ok_from_the_table(store, emulators, set_up, exist_ok):
    """Absent: created plain (the image creates the table); with the graph's metadata: with
    --exist-ok, so a re-run on an existing graph needs no manual step."""
    cfg = _demo_config(commands={"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]})
    store.create_run(new_run(cfg, "r1", ["ingest"], "auto", NOW))
    if set_up:
        _set_up_graph(cfg, cfg.ds.data_source.size)
    cluster = SetupPodCluster()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")
    [name] = cluster.creates
    argv = cluster.manifests[name]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert argv[:5] == ["python", "-u", "-c", PROBE_SOURCE, "demo"]  # the graph probe, around
    assert argv[5:9] == ["python", "-m", "pychunkedgraph.pipeline.ingest.setup", "demo"]
    assert ("--exist-ok" in argv) == exist_ok and published == []
