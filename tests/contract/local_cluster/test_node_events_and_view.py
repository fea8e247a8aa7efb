"""Scheduling, pod logs, the Job events the log sink publishes, the operators' read-only view,
and a pod's processes ending with it, on local Kubernetes (the real scheduler and event
recorder, the process kubelet)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.gke.cluster import GkeCluster
from shared.ports.cluster import ClusterError
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import manifest, reasons, running, settled, wait_for

COMBINED = "(combined from similar events): "


@pytest.mark.parametrize(
    ("cpu", "memory", "short"), [("1200m", "100Mi", "cpu"), ("100m", "5Gi", "memory")]
)
def test_pods_that_do_not_fit_stay_pending_until_capacity_frees(
    kube_cluster: KubeCluster, tmp_path: Path, cpu: str, memory: str, short: str
) -> None:
    # Without the Spot toleration only the on-demand node (2 vCPU, 8 GiB) takes them: one fits.
    c, name = kube_cluster, unique(f"tight-{short}")
    go = tmp_path / "go"
    c.create_job(
        manifest(name, completions=2, parallelism=2, env={"GO_0": str(go)}, cpu=cpu, memory=memory)
    )
    first = running(c, name, 1)[0]
    assert first.index == 0
    pending = wait_for(
        lambda: [p for p in c.list_pods(name) if p.reason == "FailedScheduling"],
        what="a FailedScheduling pod",
    )
    assert (pending[0].phase, pending[0].index, pending[0].node) == ("Pending", 1, "")
    job = c.get_job(name)
    assert job is not None and (job.active, job.ready) == (2, 1)
    # The scheduler's event is about the pod: among the pod events, not the Job's.
    sched = wait_for(
        lambda: [e for e in c.pod_events(name) if e["reason"] == "FailedScheduling"],
        what="the scheduler's event",
    )
    assert sched[0]["involvedObject"]["kind"] == "Pod"
    assert sched[0]["involvedObject"]["name"] == pending[0].name
    assert f"Insufficient {short}" in sched[0]["message"]
    assert "FailedScheduling" not in reasons(c.job_events(name))
    go.touch()
    assert settled(c, name).condition == "Complete"
    assert "FailedScheduling" not in [e["jsonPayload"]["reason"] for e in c.job_log_entries(name)]


def test_pod_logs_are_kept_and_readable_by_pod_name(kube_cluster: KubeCluster) -> None:
    c, name = kube_cluster, unique("logs")
    code = "import sys\nfor n in range(5): print(f'line {n} of index', sys.argv[1])"
    c.create_job(
        manifest(
            name,
            completions=2,
            parallelism=2,
            command=["python", "-c", code, "$(JOB_COMPLETION_INDEX)"],
        )
    )
    settled(c, name)
    for pod in c.list_pods(name):
        assert c.pod_log(pod.name, tail_lines=2) == (
            f"line 3 of index {pod.index}\nline 4 of index {pod.index}\n"
        )
        assert c.pod_log(pod.name).count("\n") == 5
        stamp = c.pod_log_updated(pod.name)
        assert stamp is not None and pod.started is not None and stamp >= pod.started
    with pytest.raises(ClusterError):
        c.pod_log(f"{name}-9-zzzzz")


def test_job_events_are_published_as_gke_log_entries_25_per_job(kube_cluster: KubeCluster) -> None:
    # The Job controller's recorder (client-go tools/record events_cache.go): 9 events alike
    # but for their message, then the 10th and later as one aggregate Event ("(combined from
    # similar events): " and the latest message), its count growing; a burst of 25 writes per
    # Job (then 1 per 5 minutes), updates included. A Job of 27 pods: the 26th and 27th
    # SuccessfulCreate and its Completed event never reach the API server, nor the log sink.
    c, name = kube_cluster, unique("events")
    c.create_job(manifest(name, completions=27, parallelism=9))
    job = settled(c, name)
    assert (job.condition, job.succeeded) == ("Complete", 27)
    stored = c.job_events(name)
    assert "Completed" not in reasons(stored)
    assert set(reasons(stored)) == {"SuccessfulCreate"}
    combined = [e for e in stored if e["message"].startswith(COMBINED)]
    assert (len(stored), len(combined), combined[0]["count"]) == (10, 1, 16)
    # What the sink published: each write of an Event, as GKE's exporter writes it.
    entries = wait_for(
        lambda: (e := c.job_log_entries(name)) and len(e) == 25 and e, what="25 entries published"
    )
    for entry in entries:
        assert entry["logName"] == "projects/test/logs/events"
        assert entry["resource"]["type"] == "k8s_cluster"
        assert entry["resource"]["labels"]["cluster_name"] == "local"
        payload = entry["jsonPayload"]
        assert payload["kind"] == "Event" and payload["reason"] == "SuccessfulCreate"
        assert payload["involvedObject"]["kind"] == "Job"
        assert payload["involvedObject"]["name"] == name
    assert len({e["insertId"] for e in entries}) == 25
    assert {e["jsonPayload"]["metadata"]["name"] for e in entries} == {
        e["metadata"]["name"] for e in stored
    }
    messages = [e["jsonPayload"]["message"] for e in entries]
    assert [m.startswith(COMBINED) for m in messages] == [False] * 9 + [True] * 16
    created = {re.sub(r"^.*Created pod: ", "", m) for m in messages}
    pods = {p.name for p in c.list_pods(name)}
    assert len(created) == 25 and created < pods  # two pods' creation was never told


def test_the_operators_view_reads_what_the_controller_writes(kube_cluster: KubeCluster) -> None:
    # terraform's operator Role: Jobs, pods, logs and events to read, no Job writes.
    c, name = kube_cluster, unique("viewed")
    kube = c.kube
    view = GkeCluster.from_kubeconfig(
        namespace=kube.namespace, config_file=str(kube.operator_kubeconfig)
    )
    c.create_job(manifest(name, completions=2, parallelism=2, labels={"run": name}))
    job = settled(c, name)
    assert view.get_job(name) == job
    assert view.list_jobs({"run": name}) == [job] and view.list_jobs({"run": f"{name}-x"}) == []
    assert view.list_pods(name) == c.list_pods(name)
    assert view.list_pods(name, index=1) == c.list_pods(name, index=1)
    assert view.job_events(name) == c.job_events(name)
    pod = c.list_pods(name)[0].name
    assert view.pod_log(pod) == c.pod_log(pod)
    assert view.get_job(unique("nope")) is None and view.list_pods(unique("nope")) == []
    for mutate in (
        lambda: view.create_job(manifest(unique("x"))),
        lambda: view.patch_job(name, parallelism=3),
        lambda: view.delete_job(name),
        lambda: view.delete_pod(pod),
    ):
        with pytest.raises(ClusterError, match="403"):
            mutate()
    assert c.get_job(name) == job


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def test_a_deleted_pod_leaves_no_process_running(kube_cluster: KubeCluster, tmp_path) -> None:
    # Graceful deletion as the kubelet does it: SIGTERM, the grace period, SIGKILL; and, as a
    # container runtime, whatever the container started ends with it.
    c, name = kube_cluster, unique("stubborn")
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
    c.create_job(
        manifest(name, command=["python", "-c", stubborn], grace=1, backoff_limit_per_index=0)
    )
    wait_for(lambda: len(list(pids.iterdir())) == 1, what="the pod and its child started")
    all_pids = [int(x) for f in pids.iterdir() for x in f.name.split("-")]
    assert all(_alive(p) for p in all_pids)
    [pod] = wait_for(lambda: [p for p in c.list_pods(name) if p.phase == "Running"], what="Running")
    c.delete_pod(pod.name)
    wait_for(lambda: not [p for p in all_pids if _alive(p)], what="both processes ended")
    # SIGKILL after the grace period (exit 137): the index's one failure (backoffLimitPerIndex 0).
    job = settled(c, name)
    assert (job.condition, job.failed_indexes, job.failed) == ("Failed", "0", 1)
    assert c.list_pods(name) == []  # deleted: gone once terminated
    # The Job controller tells only of the pods it deletes itself.
    assert "SuccessfulDelete" not in reasons(c.job_events(name))
