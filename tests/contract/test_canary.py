"""A canary through the controller on the local stack (Firestore emulator, local Kubernetes):
before layer 2 runs, a Job of two chunks per index (PCG_BATCH_SIZE=2, the layer's own seed and
grid) runs N/2 pods; the process kubelet measures their peak memory from /proc (Cloud
Monitoring's part, read through the pod-usage port); the layer is
sized from it (job.canary_margin), the approval it then waits for carries the simulator's
forecast of the build, and once approved the layer's Job asks the canary's size."""

from __future__ import annotations

from typing import Any

from adapters.google.firestore_store import FirestoreRunStore
from adapters.local.pod_usage import KubeletPodUsage
from shared.config.config_files import load_config
from shared.control.controller import Controller, utcnow
from shared.model.phase import Phase
from shared.operate.operator_actions import approve
from shared.reconcile.build_plan import new_run
from tests.builders.kube_cluster import unique
from tests.builders.local_jobs import wait_for
from tests.builders.stored_runs import DEMO

CHUNKS = 4
PODS = 2  # two chunks a pod
# A pod that holds ~300 MiB for a moment and reports as our worker does (its batch summary:
# two chunks, the first 0.4 s of their 0.5 s).
WORKER = (
    "import json, os, time\n"
    "block = bytearray(300 * 1024 * 1024)\n"
    "time.sleep(0.5)\n"
    "print('env', os.environ['PCG_BATCH_SIZE'], os.environ['JOB_COMPLETION_INDEX'])\n"
    "print(json.dumps({'message': 'batch summary: 2 processed', 'startup_s': 0.2,"
    " 'processed': 2, 'chunk_compute_s': 0.5, 'first_chunk_s': 0.4}))\n"
)


def test_a_canary_sizes_layer_2_and_its_approval_carries_the_forecast(
    store: FirestoreRunStore, kube_cluster: Any
) -> None:
    cluster = kube_cluster
    cfg = load_config(DEMO)
    job = cfg.job.model_copy(update={"canary_margin": 2.0})
    ctl = cfg.controller.model_copy(update={"canary_chunks": CHUNKS, "advance": "approve"})
    cmd = {"ingest": ["python", "-c", WORKER]}
    cfg = cfg.model_copy(update={"commands": cmd, "job": job, "controller": ctl})
    run = new_run(cfg, unique("r-canary"), ["ingest"], "approve", utcnow())
    run.setups.clear()
    store.create_run(run)
    published: list[tuple[str, dict[str, Any]]] = []
    usage = KubeletPodUsage(cluster.kube.kubelet)
    ctrl = Controller(
        store, cluster, lambda kind, body: published.append((kind, body)), pod_usage=usage
    )

    ctrl.reconcile(run.run_id)  # creates the canary, not the layer, and asks no approval yet
    ls = store.load_run(run.run_id).layers["ingest-L2"]
    assert ls.canary.phase == Phase.RUNNING and ls.phase == "waiting" and not published
    assert store.run_for_job(ls.canary.job) == run.run_id  # its Job events reconcile the run
    status = wait_for(
        lambda: (j := cluster.get_job(ls.canary.job)) and j.condition == "Complete" and j,
        timeout=120,
        what="the canary Job to complete",
    )
    assert status.completions == PODS
    pods = cluster.list_pods(ls.canary.job)
    logs = sorted(cluster.pod_log(p.name).splitlines()[0] for p in pods)
    assert logs == [f"env 2 {i}" for i in range(PODS)]  # two chunks per index, as asked
    peaks = usage.life_usage(ls.canary.job, pods)  # the kubelet's, from /proc
    assert len(peaks) == PODS and all(u.peak_memory_gib > 0.29 for u in peaks.values())

    # One reconcile: the canary's figures, size and forecast are recorded, and its second
    # pass plans the layer at that size and asks for its approval (not a tick later).
    ctrl.reconcile(run.run_id)
    ls = store.load_run(run.run_id).layers["ingest-L2"]
    assert ls.canary.phase == Phase.SUCCEEDED and ls.phase == "waiting"
    assert ls.canary.record["sized"]["memory_gib"] >= 0.75  # 2 x ~0.3 GiB, above the planned 0.5
    assert ls.canary.record["planned"]["memory_gib"] == 0.5
    # the times the worker logged (read from the pods' logs): the second chunk's 0.1 s, the
    # process's start-up, and the pod's start-up apart from its chunks
    assert ls.canary.record["chunk_p50_s"] == 0.1 and ls.canary.record["startup_p50_s"] == 0.2
    assert ls.canary.record["pod_overhead_p50_s"] is not None
    forecast = ls.canary.record["forecast"]
    assert forecast["wall_s"] > 0 and forecast["cost_usd"] > 0 and forecast["pods"] > CHUNKS
    (body,) = [b for kind, b in published if kind == "approval_needed"]
    assert body["layer"] == 2 and body["canary"]["forecast"] == forecast

    store.update_run(run.run_id, lambda r: approve(r, "ingest", [2], "tester", utcnow()))
    ctrl.reconcile(run.run_id)
    ls = store.load_run(run.run_id).layers["ingest-L2"]
    assert (
        ls.phase == "running"
        and ls.pods.memory_request_gib == ls.canary.record["sized"]["memory_gib"]
    )
    cluster.created += [ls.canary.job, ls.job.name]
    layer_pods = wait_for(
        lambda: cluster.list_pods(ls.job.name), timeout=120, what="the layer's pods"
    )
    assert layer_pods[0].memory_request_gib == ls.canary.record["sized"]["memory_gib"]
