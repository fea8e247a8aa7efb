"""Scheduling, pod logs, published events, the read-only view and stopping the local cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from adapters.local.cluster.events import EventSettings
from adapters.local.cluster.local_cluster import LocalCluster
from adapters.local.cluster.view import LocalClusterView

from shared.ports.cluster import ClusterError, JobStatus
from tests.builders.local_jobs import (
    finished,
    manifest,
    reasons,
    running,
    wait_for,
)


@pytest.mark.parametrize(
    ("cpu", "memory", "short"), [("600m", "100Mi", "cpu"), ("100m", "768Mi", "memory")]
)
def test_pods_that_do_not_fit_stay_pending_until_capacity_frees(
    make_cluster, tmp_path, cpu, memory, short
) -> None:
    c, published = make_cluster(capacity_cpu=1.0, capacity_memory_gib=1.0)
    go = tmp_path / "go"
    c.create_job(
        manifest(
            "tight", completions=2, parallelism=2, env={"GO_0": str(go)}, cpu=cpu, memory=memory
        )
    )
    first = running(c, "tight", 1)[0]
    assert first.index == 0
    pending = wait_for(
        lambda: [p for p in c.list_pods("tight") if p.reason == "FailedScheduling"],
        what="a FailedScheduling pod",
    )
    assert pending[0].phase == "Pending" and pending[0].index == 1
    assert c.get_job("tight").active == 2 and c.get_job("tight").ready == 1
    sched = [e for e in c.job_events("tight") if e["reason"] == "FailedScheduling"]
    assert len(sched) == 1 and sched[0]["involvedObject"]["kind"] == "Pod"
    assert sched[0]["involvedObject"]["name"] == pending[0].name
    assert f"Insufficient {short}" in sched[0]["message"]
    assert c.pod_log(pending[0].name) == ""
    go.touch()
    job = finished(c, "tight")
    assert job.condition == "Complete"
    assert "FailedScheduling" not in reasons([e["jsonPayload"] for e in published])


def test_pod_logs_are_kept_and_readable_by_pod_name(cluster) -> None:
    c, _ = cluster
    code = "import sys\nfor n in range(5): print(f'line {n} of index', sys.argv[1])"
    c.create_job(
        manifest(
            "logs",
            completions=2,
            parallelism=2,
            command=["python", "-c", code, "$(JOB_COMPLETION_INDEX)"],
        )
    )
    finished(c, "logs")
    for pod in c.list_pods("logs"):
        assert c.pod_log(pod.name, tail_lines=2) == (
            f"line 3 of index {pod.index}\nline 4 of index {pod.index}\n"
        )
        assert c.pod_log(pod.name).count("\n") == 5
        assert c.pod_log(pod.name, tail_lines=0) == ""
    with pytest.raises(ClusterError):
        c.pod_log("logs-9-zzzzz")


def test_job_events_are_published_as_gke_log_entries_outside_the_lock(make_cluster) -> None:
    seen: list[dict[str, Any]] = []
    statuses: list[JobStatus | None] = []
    holder: dict[str, LocalCluster] = {}

    def on_event(entry: dict[str, Any]) -> None:
        # Calling back into the cluster would deadlock if the lock were held here.
        statuses.append(holder["c"].get_job("events"))
        seen.append(entry)
        if len(seen) == 1:
            raise RuntimeError("a broken subscriber must not break the cluster")

    c, _ = make_cluster(
        on_event=on_event,
        project="proj",
        cluster_name="cl",
        location="loc",
        events=EventSettings.instant(),
    )
    holder["c"] = c
    c.create_job(manifest("events", completions=2, parallelism=2))
    finished(c, "events")
    wait_for(lambda: "Completed" in [e["jsonPayload"]["reason"] for e in seen], what="Completed")
    assert len(statuses) == len(seen) >= 3
    for entry in seen:
        assert entry["logName"].endswith("/logs/events")
        assert entry["logName"] == "projects/proj/logs/events"
        assert entry["resource"]["type"] == "k8s_cluster"
        assert entry["resource"]["labels"]["cluster_name"] == "cl"
        payload = entry["jsonPayload"]
        assert payload["kind"] == "Event"
        assert payload["involvedObject"]["kind"] == "Job"
        assert payload["involvedObject"]["name"] == "events"
    assert len({e["insertId"] for e in seen}) == len(seen)
    names = sorted(p.name for p in c.list_pods("events"))
    payloads = [e["jsonPayload"] for e in seen]
    creates = sorted(p["message"] for p in payloads if p["reason"] == "SuccessfulCreate")
    assert creates == [f"Created pod: {n}" for n in names]
    kept = c.job_events("events")
    assert [e["metadata"]["name"] for e in kept] == [
        e["jsonPayload"]["metadata"]["name"] for e in seen
    ]


def test_the_read_only_view_sees_what_the_cluster_writes(cluster) -> None:
    c, _ = cluster
    c.create_job(manifest("viewed", completions=2, parallelism=2, labels={"run": "v"}))
    job = finished(c, "viewed")
    view = LocalClusterView(c.state_dir)
    wait_for(lambda: view.get_job("viewed") == c.get_job("viewed"), what="view up to date")
    assert view.get_job("viewed") == job
    assert view.list_jobs({"run": "v"}) == [job] and view.list_jobs({"run": "x"}) == []
    assert view.list_pods("viewed") == c.list_pods("viewed")
    assert view.list_pods("viewed", index=1) == c.list_pods("viewed", index=1)
    assert view.job_events("viewed") == c.job_events("viewed")
    pod = c.list_pods("viewed")[0].name
    assert view.pod_log(pod) == c.pod_log(pod)
    assert view.get_job("nope") is None and view.list_pods("nope") == []
    path = c.jobs_dir / "viewed.json"
    assert json.loads(path.read_text())["version"] == 1
    before = path.stat().st_mtime_ns
    c.wait_ticks(5)
    assert path.stat().st_mtime_ns == before  # written only when something changed
    for mutate in (
        lambda: view.create_job(manifest("x")),
        lambda: view.patch_job("viewed", parallelism=3),
        lambda: view.delete_job("viewed"),
    ):
        with pytest.raises(ClusterError, match="pipeline scale"):
            mutate()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def test_stop_leaves_no_pod_process_running(make_cluster, tmp_path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    stubborn = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open(os.path.join({str(pids)!r}, f'{{os.getpid()}}-{{child.pid}}'), 'w').close()\n"
        "time.sleep(600)\n"
    )
    c, _ = make_cluster(stop_grace_seconds=1.0)
    c.create_job(
        manifest(
            "stubborn", completions=2, parallelism=2, command=["python", "-c", stubborn], grace=1
        )
    )
    wait_for(lambda: len(list(pids.iterdir())) == 2, what="pods and their children started")
    all_pids = [int(x) for f in pids.iterdir() for x in f.name.split("-")]
    assert all(_alive(p) for p in all_pids)
    started = time.monotonic()
    c.stop()
    assert time.monotonic() - started < 10
    assert not [p for p in all_pids if _alive(p)]
    assert all(p.phase == "Failed" for p in c.list_pods("stubborn"))
    c.stop()  # idempotent
