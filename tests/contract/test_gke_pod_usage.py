"""GKE pods' lifetime usage through the controller (Firestore emulator, the recording
cluster as GKE lists pods: no usage figures): when a layer's Job completes, its pods' peak
memory and mean CPU are read once from Cloud Monitoring (`timeSeries.list` responses written
by hand in the published shape, tests/fixtures/monitoring/) and kept on the layer as it
closes, for right-sizing; a refused or partial answer leaves it without figures
(docs/canary-and-rightsize.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pod_usage import CPU_USAGE, MEMORY_USED, CloudPodUsage
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.control.observe import Observer
from shared.model.phase import Phase
from shared.ports.cluster import PodInfo
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import RecordingCluster
from tests.builders.fixture_http import MonitoringSession
from tests.builders.stored_runs import DEMO

NOW = datetime(2026, 12, 1, 22, 4, tzinfo=UTC)  # the fixtures' time
JOB = "run1-main-l2"
PODS = ("run1-main-l2-0-x7k2p", "run1-main-l2-1-q9v4d")
CANARY, CANARY_POD = "run1-main-l2-canary", "run1-main-l2-canary-0-m2hbn"


def _session(status: int = 200, refusal: str = "", memory: str = "") -> MonitoringSession:
    return MonitoringSession(
        {
            (MEMORY_USED, ""): (status, refusal or memory or "container_memory"),
            (CPU_USAGE, ""): (status, refusal or "container_cpu"),
        }
    )


class GkeLikeCluster(RecordingCluster):
    """Lists the Job's two succeeded pods without usage figures, as GKE's API does."""

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        names = {JOB: PODS, CANARY: (CANARY_POD,)}.get(job_name, ())
        start, end = NOW - timedelta(minutes=7), NOW - timedelta(minutes=1)
        return [
            PodInfo(n, f"uid-{n}", job_name, i, "Succeeded", 0.25, 0.5, start, start, end)
            for i, n in enumerate(names)
        ]


@pytest.mark.parametrize(
    "answer", [(200, None), (403, "denied"), (200, "container_memory_partial")]
)
def test_a_completed_layer_keeps_its_pods_usage_from_monitoring(firestore_project, answer):
    store, cluster = FirestoreRunStore(firestore_project), GkeLikeCluster()
    run = new_run(load_config(DEMO), "run1", ["ingest"], "auto", NOW - timedelta(minutes=10))
    run.setups.clear()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", JOB, 2, 2
    ls.pods.cpu_request, ls.pods.memory_request_gib = 0.25, 0.5
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = NOW - timedelta(minutes=5)
    store.create_run(run)
    cluster.create_job({"metadata": {"name": JOB}, "spec": {"completions": 2, "parallelism": 2}})
    cluster.finish(JOB, condition="Complete", succeeded=2, completed_indexes="0-1")
    status, refusal = answer
    partial = refusal == "container_memory_partial"
    session = _session(status, "" if partial else refusal or "", refusal if partial else "")
    usage = CloudPodUsage("my-project", "pcg", session, clock=lambda: NOW)
    controller = Controller(store, cluster, lambda k, b: None, clock=lambda: NOW, pod_usage=usage)
    controller.reconcile("run1")
    done = store.load_run("run1").layers["ingest-L2"]
    assert done.phase == "succeeded"
    if status == 200 and not partial:
        # pod 0: peak 1.5 GiB, 0.75 vCPU; pod 1 (one point each): 0.75 GiB, 0.3 vCPU
        assert (done.pods.used_cpu, done.pods.used_memory_gib) == ([0.75, 0.3], [1.5, 0.75])
    else:
        # refused (roles/monitoring.viewer missing), or answered in part (a region
        # unreachable: its peaks are lower bounds): the layer closes without figures
        assert (done.pods.used_cpu, done.pods.used_memory_gib) == ([], [])
    assert len(session.queries) == (1 if status == 403 else 2)


def test_a_finished_canarys_pods_are_observed_with_their_usage(firestore_project):
    """The canary's one pod has a memory point of 4 GiB and no CPU span: observed with that
    peak and no CPU figure, which the canary sizes from (its memory; its CPU stays the
    config's, tests/unit/reconcile/test_canary.py)."""
    store, cluster = FirestoreRunStore(firestore_project), GkeLikeCluster()
    run = new_run(load_config(DEMO), "run1", ["ingest"], "auto", NOW - timedelta(minutes=10))
    ls = run.layers["ingest-L2"]
    ls.canary.phase, ls.canary.job = Phase.RUNNING, CANARY
    ls.canary.record = {"chunks": 1, "parallelism": 1, "cpu": 0.25}
    store.create_run(run)
    cluster.create_job({"metadata": {"name": CANARY}, "spec": {"completions": 1, "parallelism": 1}})
    session = _session()
    usage = CloudPodUsage("my-project", "pcg", session, clock=lambda: NOW)
    observer = Observer(store, cluster, lambda: NOW, pod_usage=usage)
    (pod,) = observer.observe("run1").seen.pods[CANARY]
    assert pod.peak_memory_gib is None and session.queries == []  # running: nothing read
    cluster.finish(CANARY, condition="Complete", succeeded=1, completed_indexes="0")
    (pod,) = observer.observe("run1").seen.pods[CANARY]
    assert (pod.peak_memory_gib, pod.cpu_used) == (4.0, None)
    observer.observe("run1")  # a retried reconcile: answered from memory
    assert len(session.queries) == 2
