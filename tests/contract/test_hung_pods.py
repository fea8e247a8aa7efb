"""A hung pod through the controller and the real local cluster (subprocess pods), on the
Firestore emulator: a pod that stays alive without progress past the hung threshold is
deleted, alerted once as `pod_hung` (with its batch and log tail), counted on its layer, and
its index is retried until the layer completes."""

from __future__ import annotations

import copy
from typing import Any

from shared.adapters.local.cluster.local_cluster import LocalCluster
from shared.build_plan import new_run
from shared.config import load_config
from shared.controller import Controller, utcnow
from tests.builders.local_jobs import wait_for
from tests.builders.stored_runs import DEMO

# Index 0's first attempt logs a line, then blocks forever (as a deadlocked worker does:
# alive, writing nothing); every other pod finishes at once.
PROGRAM = """
import os, sys, time
mark = os.environ["HANG_MARK"]
if os.environ["JOB_COMPLETION_INDEX"] == "0" and not os.path.exists(mark):
    open(mark, "w").close()
    print("chunk 2_(0, 0, 0): reading the watershed block", flush=True)
    while True:
        time.sleep(1)
"""


class ProgramCluster(LocalCluster):
    """The local cluster, running PROGRAM in place of the rendered worker command."""

    def __init__(self, state_dir: Any, mark: str) -> None:
        super().__init__(state_dir)
        self.mark = mark

    def create_job(self, manifest: dict[str, Any]) -> bool:
        manifest = copy.deepcopy(manifest)
        pod = manifest["spec"]["template"]["spec"]
        pod["terminationGracePeriodSeconds"] = 1
        container = pod["containers"][0]
        container["command"], container["args"] = ["python", "-c", PROGRAM], []
        container["env"] = [{"name": "HANG_MARK", "value": self.mark}]
        return super().create_job(manifest)


def test_a_hung_pod_is_deleted_alerted_once_and_its_index_retried(store, tmp_path):
    cfg = load_config(DEMO)
    controller_cfg = cfg.controller.model_copy(update={"hung_floor_s": 4.0})
    cfg = cfg.model_copy(update={"controller": controller_cfg})
    run = new_run(cfg, "r-hung", ["ingest"], "auto", utcnow())
    run.setups.clear()  # layer 2 is what this test watches
    store.create_run(run)
    published: list[tuple[str, dict[str, Any]]] = []
    with ProgramCluster(tmp_path / "cluster", str(tmp_path / "hung-once")) as cluster:
        controller = Controller(store, cluster, lambda k, b: published.append((k, b)))

        def layer_done() -> bool:
            controller.reconcile("r-hung")
            return store.load_run("r-hung").layers["ingest-L2"].phase != "running"

        wait_for(layer_done, timeout=60, what="layer 2 to finish")
        ls = store.load_run("r-hung").layers["ingest-L2"]
        index0 = cluster.list_pods(ls.job_name, 0)
    assert ls.phase == "succeeded", ls.failure_reason
    hung = [body for kind, body in published if kind == "pod_hung"]
    assert len(hung) == 1, hung
    [body] = hung
    assert body["index"] == 0 and body["job"] == ls.job_name
    assert body["pod"] == index0[0].name  # the first attempt, deleted
    assert "reading the watershed block" in body["log_tail"]
    assert len(body["chunks"]) == 32 and body["no_progress_s"] >= 4
    assert ls.pods_hung == 1 and len(index0) >= 2  # retried by the Job
