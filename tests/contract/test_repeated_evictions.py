"""Repeated node-pressure evictions through the controller (Firestore emulator, local
Kubernetes: the process kubelet evicts, the real Job controller retries):
the kubelet-style evictions of one index are counted, `index_evicted_repeatedly` is alerted
once with that index's chunks after `job.max_evictions_per_index` (3, the default), a Spot
preemption is not counted, and the layer's next attempt asks `job.oom_memory_factor` more
memory. The Job itself never counts an eviction against the index."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from shared.config.config_files import load_config
from shared.control.controller import Controller, utcnow
from shared.jobs.layer_spec import layer_spec
from shared.operate.operator_actions import cancel, resubmit
from shared.reconcile.build_plan import new_run
from shared.reconcile.evictions import ALERT_KIND
from tests.builders.kube_cluster import unique
from tests.builders.local_jobs import wait_for
from tests.builders.stored_runs import DEMO

SLEEPER = ["python", "-c", "import time; time.sleep(120)"]  # a pod that runs until evicted
FACTOR = 2.0


def start(store: FirestoreRunStore):
    cfg = load_config(DEMO)
    job = cfg.job.model_copy(update={"oom_memory_factor": FACTOR})
    cfg = cfg.model_copy(update={"commands": {"ingest": SLEEPER}, "job": job})
    run = new_run(cfg, unique("r-evict"), ["ingest"], "auto", utcnow())
    run.setups.clear()
    store.create_run(run)
    return cfg, run.run_id


def running_pod(cluster: Any, job: str, index: int, other_than: str = ""):
    return wait_for(
        lambda: next(
            (
                p
                for p in cluster.list_pods(job, index)
                if p.phase == "Running" and p.name != other_than
            ),
            None,
        ),
        timeout=90,
        what=f"a running pod of {job} index {index}",
    )


def failed_pods(cluster: Any, job: str, index: int, n: int) -> None:
    wait_for(
        lambda: len([p for p in cluster.list_pods(job, index) if p.phase == "Failed"]) >= n,
        timeout=90,
        what=f"{n} failed pods of {job} index {index}",
    )


def test_an_index_evicted_repeatedly_is_alerted_once_and_its_next_attempt_gets_more_memory(
    store: FirestoreRunStore, kube_cluster: Any
) -> None:
    cluster = kube_cluster
    cfg, run_id = start(store)
    published: list[tuple[str, dict[str, Any]]] = []
    ctrl = Controller(store, cluster, lambda kind, body: published.append((kind, body)))
    ctrl.reconcile(run_id)  # creates the layer-2 Job (2 pods: the ramp's start)
    ls = store.load_run(run_id).layers["ingest-L2"]
    job, memory = ls.job.name, ls.pods.memory_request_gib
    cluster.created.append(job)

    def evicted_alerts() -> list[dict[str, Any]]:
        return [body for kind, body in published if kind == ALERT_KIND]

    for n in (1, 2, 3, 4):  # index 0: one eviction past the limit
        assert cluster.evict_pod(running_pod(cluster, job, 0).name)
        failed_pods(cluster, job, 0, n)
        ctrl.reconcile(run_id)
        assert store.load_run(run_id).layers["ingest-L2"].faults.evictions == f"0:{n}"
        assert len(evicted_alerts()) == (0 if n < 3 else 1)
    # A Spot preemption of index 1 (the Eviction API): retried for free, not counted as an
    # eviction. The preempted pod is deleted once it has ended: the controller sees it Failed
    # with DisruptionTarget while the Job's tracking finalizer holds it.
    preempted = running_pod(cluster, job, 1).name
    assert cluster.preempt_pod(preempted)
    running_pod(cluster, job, 1, other_than=preempted)  # its replacement
    ctrl.reconcile(run_id)
    layer = store.load_run(run_id).layers["ingest-L2"]
    assert layer.faults.evictions == "0:4"
    assert layer.pods.preempted == 5  # 4 evictions + 1 preemption: no retry spent on any
    status = cluster.get_job(job)
    assert (status.failed, status.failed_indexes) == (0, "")  # the Job ignored them all
    running_pod(cluster, job, 0)  # and retries index 0 yet again

    [alert] = evicted_alerts()
    assert (alert["stage"], alert["layer"], alert["indexes"], alert["job"]) == (
        "ingest",
        2,
        "0",
        job,
    )
    chunks = [list(c) for c in layer_spec(cfg, "ingest", 2).batch_chunks(0)]
    assert alert["batches"] == [{"index": 0, "evictions": 3, "chunks": chunks}]
    assert alert["memory_request_gib"] == pytest.approx(memory)

    # The operator ends the attempt and re-submits it: it asks FACTOR times the memory.
    store.update_run(run_id, lambda run: cancel(run, "ingest", 2, "alice", utcnow()))
    ctrl.reconcile(run_id)  # deletes the evicted attempt's Job
    store.update_run(run_id, lambda run: resubmit(run, "ingest", 2, "alice", utcnow(), FACTOR))
    ctrl.reconcile(run_id)
    fresh = store.load_run(run_id).layers["ingest-L2"]
    assert fresh.faults.memory_factor == FACTOR and fresh.faults.evictions == ""
    assert fresh.job.name != job

    def new_pods() -> list[Any]:
        # The new attempt's Job is created once the old one's pods are gone (they end on
        # SIGTERM and vanish as the Job's garbage is collected): each trigger checks again.
        ctrl.reconcile(run_id)
        name = store.load_run(run_id).layers["ingest-L2"].job.name
        return cluster.list_pods(name) if name and name != job else []

    pods = wait_for(new_pods, timeout=90, what="the new attempt's pods")
    cluster.created.append(pods[0].job_name)
    assert pods[0].memory_request_gib == pytest.approx(memory * FACTOR)
