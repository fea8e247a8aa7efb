"""A hung worker through the controller and local Kubernetes, on the Firestore and
Bigtable emulators: index 0's first pod runs the worker with a plugin that blocks at its
fourth chunk (alive, its claims renewed, no progress). Past the hung threshold the controller
deletes it, alerts `pod_hung` once (its batch and log tail), counts it on the layer, and the
Job retries the index until the layer completes. Progress is read from the pods' logs and
the done markers in the graph table."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from adapters.bigtable.done_times import BigtableDoneTimes
from shared.config.config import Bigtable, Dataset
from shared.config.config_files import load_config
from shared.control.controller import Controller, utcnow
from shared.model.worker_contract import COMPLETION_INDEX
from shared.ports.cluster import PodInfo
from shared.reconcile.build_plan import new_run
from tests.builders.demo_configs import with_batch
from tests.builders.fakes import RecordingCluster
from tests.builders.local_jobs import wait_for
from tests.builders.stored_runs import DEMO, NOW
from tests.builders.worker_env import worker_env
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

FLOOR_S = 20.0  # the hung threshold: well past a worker's start-up on a loaded machine


class WorkerCluster:
    """Local Kubernetes running the worker (layer 2) on the test's table with `hang_once`."""

    def __init__(self, cluster: Any, env: dict[str, str]) -> None:
        self.cluster, self.env = cluster, env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def create_job(self, manifest: dict[str, Any]) -> bool:
        manifest = copy.deepcopy(manifest)
        pod = manifest["spec"]["template"]["spec"]
        pod["terminationGracePeriodSeconds"] = 1
        container = pod["containers"][0]  # the rendered command, this test's env
        container["env"] = [{"name": k, "value": v} for k, v in self.env.items()]
        return self.cluster.create_job(manifest)


def test_a_hung_worker_is_deleted_alerted_once_and_its_index_retried(
    store, demo, bigtable_table, tmp_path, kube_cluster
):
    _, table_id = bigtable_table
    cfg = with_batch(load_config(DEMO))  # several batches of layer 2
    cfg = cfg.model_copy(
        update={
            "graph_id": table_id,
            "dataset_config": Dataset.model_validate(demo.dataset),  # a 4x4x4 chunk grid
            "bigtable": Bigtable(project=BIGTABLE_PROJECT, instance=BIGTABLE_INSTANCE),
            "controller": cfg.controller.model_copy(update={"hung_floor_s": FLOOR_S}),
        }
    )
    run = new_run(cfg, "r-hung", ["ingest"], "auto", utcnow())
    run_id = run.run_id
    run.setups.clear()  # layer 2 is what this test watches
    run.top_layers = {"ingest": 2}
    run.layers = {"ingest-L2": run.layers["ingest-L2"]}
    store.create_run(run)
    env = worker_env(
        table_id,
        demo.dataset,
        stage="ingest",
        layer=2,
        index=0,
        batch_size=cfg.job.batch_size,
        seed=cfg.job.perm_seed,
        l2_shape=cfg.layer2_shape(),
        PCG_WORKLOAD="tests.builders.plugins:hang_once",
        TEST_HANG_MARK=str(tmp_path / "hung-once"),
    )
    env.pop(COMPLETION_INDEX)  # each pod gets its own
    published: list[tuple[str, dict[str, Any]]] = []
    markers = BigtableDoneTimes()
    cluster = WorkerCluster(kube_cluster, env)
    controller = Controller(
        store, cluster, lambda k, b: published.append((k, b)), done_times=markers
    )

    def layer_done() -> bool:
        controller.reconcile(run_id)
        return store.load_run(run_id).layers["ingest-L2"].phase != "running"

    wait_for(layer_done, timeout=150, what="layer 2 to finish")
    ls = store.load_run(run_id).layers["ingest-L2"]
    index0 = cluster.list_pods(ls.job.name, 0)
    markers.close()
    assert ls.phase == "succeeded", ls.failure_reason
    hung = [body for kind, body in published if kind == "pod_hung"]
    assert len(hung) == 1, hung
    [body] = hung
    assert body["index"] == 0 and body["job"] == ls.job.name
    # The first attempt, deleted: gone from the API once the Job controller has counted it
    # (Kubernetes keeps no deleted pod), and the index's retry succeeded.
    assert body["pod"] not in [p.name for p in index0]
    assert [p.phase for p in index0] == ["Succeeded"]
    assert "reading the watershed block" in body["log_tail"]
    assert len(body["chunks"]) == 32 and body["no_progress_s"] >= FLOOR_S
    assert ls.faults.hung == 1  # retried by the Job
    assert [k for k, _ in published].count("run_finished") == 1


class ManyPods(RecordingCluster):
    """A layer's Job (16 indexes) with 1,000 young running pods and two old ones, `old-0`
    silent for an hour, `old-1` logging ten minutes ago; it records what the controller reads
    and deletes."""

    def __init__(self) -> None:
        super().__init__()
        self.job = ""
        self.log_reads: list[str] = []
        self.deleted: list[str] = []
        young, old = NOW - timedelta(seconds=60), NOW - timedelta(hours=2)
        self.pods = [
            PodInfo(f"young-{i}", f"y{i}", "", i % 16, "Running", 0.25, 0.5, young, young)
            for i in range(1000)
        ] + [PodInfo(f"old-{i}", f"o{i}", "", i, "Running", 0.25, 0.5, old, old) for i in (0, 1)]
        self.last_line = {"old-0": NOW - timedelta(hours=1), "old-1": NOW - timedelta(minutes=10)}

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        return [replace(p, job_name=job_name) for p in self.pods] if job_name == self.job else []

    def pod_log_updated(self, pod_name: str) -> datetime | None:
        self.log_reads.append(pod_name)
        return self.last_line[pod_name]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        return f"{pod_name}: waiting on a socket"

    def delete_pod(self, name: str) -> None:
        self.deleted.append(name)


def test_only_pods_old_enough_are_read_and_a_hung_one_is_handled_once(store, run):
    cluster = ManyPods()
    published: list[tuple[str, dict[str, Any]]] = []
    controller = Controller(
        store, cluster, lambda k, b: published.append((k, b)), clock=lambda: NOW
    )
    controller.reconcile("r1")  # creates the layer-2 Job
    cluster.job = store.load_run("r1").layers["ingest-L2"].job.name
    controller.reconcile("r1")
    assert sorted(cluster.log_reads) == ["old-0", "old-1"]  # not the 1,000 young pods
    assert cluster.deleted == ["old-0"]
    [body] = [b for k, b in published if k == "pod_hung"]
    assert body["pod"] == "old-0" and body["no_progress_s"] == 3600
    assert body["log_tail"] == "old-0: waiting on a socket" and body["hung_after_s"] == 1800
    # Still listed running (terminating): its delete again, never read or alerted again.
    controller.reconcile("r1")
    assert cluster.log_reads.count("old-0") == 1 and cluster.deleted == ["old-0", "old-0"]
    assert [k for k, _ in published].count("pod_hung") == 1
    assert store.load_run("r1").layers["ingest-L2"].faults.hung == 1
