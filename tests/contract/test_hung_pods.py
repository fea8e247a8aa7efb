"""A hung worker through the controller and the real local cluster, on the Firestore and
Bigtable emulators: index 0's first pod runs the worker with a plugin that blocks at its
fourth chunk (alive, its claims renewed, no progress). Past the hung threshold the controller
deletes it, alerts `pod_hung` once (its batch and log tail), counts it on the layer, and the
Job retries the index until the layer completes. Progress is read from the pods' logs and
the done markers in the graph table."""

from __future__ import annotations

import copy
from typing import Any

from shared.adapters.bigtable.done_times import BigtableDoneTimes
from shared.adapters.local.cluster.local_cluster import LocalCluster
from shared.build_plan import new_run
from shared.config import Bigtable, Dataset, load_config
from shared.controller import Controller, utcnow
from shared.worker_contract import COMPLETION_INDEX
from tests.builders.local_jobs import wait_for
from tests.builders.stored_runs import DEMO
from tests.builders.worker_env import worker_env
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

FLOOR_S = 20.0  # the hung threshold: well past a worker's start-up on a loaded machine


class WorkerCluster(LocalCluster):
    """The local cluster running the worker (layer 2) on the test's table with `hang_once`."""

    def __init__(self, state_dir: Any, env: dict[str, str]) -> None:
        super().__init__(state_dir)
        self.env = env

    def create_job(self, manifest: dict[str, Any]) -> bool:
        manifest = copy.deepcopy(manifest)
        pod = manifest["spec"]["template"]["spec"]
        pod["terminationGracePeriodSeconds"] = 1
        container = pod["containers"][0]  # the rendered command, this test's env
        container["env"] = [{"name": k, "value": v} for k, v in self.env.items()]
        return super().create_job(manifest)


def test_a_hung_worker_is_deleted_alerted_once_and_its_index_retried(
    store, demo, bigtable_table, tmp_path
):
    _, table_id = bigtable_table
    cfg = load_config(DEMO)
    cfg = cfg.model_copy(
        update={
            "graph_id": table_id,
            "dataset_config": Dataset.model_validate(demo.dataset),  # a 4x4x4 chunk grid
            "bigtable": Bigtable(project=BIGTABLE_PROJECT, instance=BIGTABLE_INSTANCE),
            "controller": cfg.controller.model_copy(update={"hung_floor_s": FLOOR_S}),
        }
    )
    run = new_run(cfg, "r-hung", ["ingest"], "auto", utcnow())
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
    with WorkerCluster(tmp_path / "cluster", env) as cluster:
        controller = Controller(
            store, cluster, lambda k, b: published.append((k, b)), done_times=markers
        )

        def layer_done() -> bool:
            controller.reconcile("r-hung")
            return store.load_run("r-hung").layers["ingest-L2"].phase != "running"

        wait_for(layer_done, timeout=90, what="layer 2 to finish")
        ls = store.load_run("r-hung").layers["ingest-L2"]
        index0 = cluster.list_pods(ls.job_name, 0)
    markers.close()
    assert ls.phase == "succeeded", ls.failure_reason
    hung = [body for kind, body in published if kind == "pod_hung"]
    assert len(hung) == 1, hung
    [body] = hung
    assert body["index"] == 0 and body["job"] == ls.job_name
    assert body["pod"] == index0[0].name  # the first attempt, deleted
    assert "reading the watershed block" in body["log_tail"]
    assert len(body["chunks"]) == 32 and body["no_progress_s"] >= FLOOR_S
    assert ls.pods_hung == 1 and len(index0) >= 2  # retried by the Job
    assert [k for k, _ in published].count("run_finished") == 1
