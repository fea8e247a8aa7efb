"""Workers' `claim_lost` records become one `claim_lost` alert per layer and set of pods
(the controller on the Firestore emulator; the cluster a recording fake with pod logs)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from shared.control.alert_severity import summary
from shared.control.alerts import MAX_BODY_BYTES, body_size
from shared.control.controller import Controller
from shared.ports.cluster import PodInfo
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import NOW


def _line(**fields: Any) -> str:
    return json.dumps({"severity": "INFO", "message": "x", **fields})


LOST_LOG = "\n".join(
    [
        _line(message="layer 2 batch 0: 32 chunks"),
        _line(severity="ERROR", event="claim_lost", chunk_id=77, message="claim_lost: ..."),
        "not json at all, claim_lost",
        _line(severity="ERROR", event="claim_lost", chunk_id=78),
        _line(severity="ERROR", event="claim_lost", chunk_id=77),  # the harness's own line
        _line(message="batch summary", exit_code=1),
    ]
)


class LoggedPods(RecordingCluster):
    """Pods of the layer's Job, each with its log; more may be added between reconciles."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: list[tuple[PodInfo, str]] = []
        self.log_reads: list[str] = []

    def add(self, job: str, index: int, phase: str, code: int | None, log: str) -> None:
        n = len(self.pods)
        at = NOW - timedelta(seconds=30 - n)
        pod = PodInfo(
            f"{job}-{index}-p{n}", f"u{n}", job, index, phase, 0.25, 0.5, at, at, at, code
        )
        self.pods.append((pod, log))

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        return [p for p, _ in self.pods if p.job_name == job_name and index in (None, p.index)]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        self.log_reads.append(pod_name)
        return next(log for p, log in self.pods if p.name == pod_name)


def _controller(store, cluster) -> tuple[Controller, list[tuple[str, dict]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    return Controller(store, cluster, lambda k, b: out.append((k, b)), clock=lambda: NOW), out


def test_claim_lost_records_are_alerted_once_per_pod_set(store, run):
    cluster = LoggedPods()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")  # creates the layer-2 Job
    job = store.load_run("r1").layers["ingest-L2"].job.name
    cluster.add(job, 0, "Failed", 1, LOST_LOG)
    cluster.add(job, 1, "Failed", 1, _line(message="transient: boom", exit_code=1))
    cluster.add(job, 0, "Succeeded", 0, LOST_LOG)  # exit 0: not read for claim_lost
    cluster.add(job, 1, "Failed", 137, LOST_LOG)  # killed: its log is not read
    controller.reconcile("r1")
    lost = [body for kind, body in published if kind == "claim_lost"]
    assert len(lost) == 1
    [body] = lost
    assert body["stage"] == "ingest" and body["layer"] == 2 and body["job"] == job
    assert body["chunks"] == [77, 78] and body["chunk_count"] == 2
    assert body["pods"] == [{"pod": f"{job}-0-p0", "index": 0, "chunks": [77, 78]}]
    # The two failed pods' logs for the check; the succeeded one's once, as the layer's first
    # pod to succeed (its process start-up, for the build's timeline), not for claim_lost.
    assert sorted(cluster.log_reads) == [f"{job}-0-p0", f"{job}-0-p2", f"{job}-1-p1"]
    # The outbox keeps the alert as published, not the check it was committed as: what
    # `pipeline alerts` lists says how many chunk claims were lost.
    [stored] = [a for a in store.all_alerts("r1") if a.kind == "claim_lost"]
    assert stored.sent and stored.body["chunk_count"] == 2 and "candidates" not in stored.body
    assert summary("claim_lost", stored.body).endswith(": 2 chunk claims lost (redone)")
    # The next reconciles see the same pods (recorded already): no second alert.
    controller.reconcile("r1")
    controller.reconcile("r1")
    assert sum(kind == "claim_lost" for kind, _ in published) == 1
    assert cluster.log_reads.count(f"{job}-0-p2") == 1  # a layer's first pod's log, once
    # A new pod of the layer with a lost claim: a new alert, for it alone.
    cluster.add(job, 1, "Failed", 1, _line(event="claim_lost", chunk_id=5))
    controller.reconcile("r1")
    bodies = [body for kind, body in published if kind == "claim_lost"]
    assert len(bodies) == 2 and bodies[1]["chunks"] == [5]


def test_a_mass_claim_loss_is_one_bounded_alert(store, run):
    cluster = LoggedPods()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")
    job = store.load_run("r1").layers["ingest-L2"].job.name
    for i in range(40):
        log = "\n".join(_line(event="claim_lost", chunk_id=i * 1000 + c) for c in range(300))
        cluster.add(job, i % 2, "Failed", 1, log)
    controller.reconcile("r1")
    [body] = [body for kind, body in published if kind == "claim_lost"]
    assert body_size(body) <= MAX_BODY_BYTES
    assert len(cluster.log_reads) == 20  # bounded reads per reconcile
    assert body["chunk_count"] == 20 * 300 and len(body["chunks"]) <= 200


def test_a_check_that_finds_no_lost_claim_leaves_nothing_in_the_outbox(store, run):
    cluster = LoggedPods()
    controller, published = _controller(store, cluster)
    controller.reconcile("r1")
    job = store.load_run("r1").layers["ingest-L2"].job.name
    cluster.add(job, 1, "Failed", 1, _line(message="transient: boom", exit_code=1))
    controller.reconcile("r1")
    assert cluster.log_reads == [f"{job}-1-p0"]  # read when the check was published
    assert not [kind for kind, _ in published if kind == "claim_lost"]
    assert not [a for a in store.all_alerts("r1") if a.kind == "claim_lost"]
