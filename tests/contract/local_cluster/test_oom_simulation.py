"""The local cluster's simulated OOM killer: a pod whose env asks for a peak memory above its
request is SIGKILLed and reported as the kubelet would (exit 137, reason OOMKilled); a pod
whose request covers the peak runs normally, and an ordinary SIGKILL stays an Error."""

from __future__ import annotations

import random

from adapters.local.cluster.pods import PEAK_MEMORY_ENV

from tests.builders.local_jobs import finished, manifest, running, wait_for


def test_a_pod_over_its_memory_is_oom_killed_and_one_with_room_completes(cluster) -> None:
    c, _ = cluster
    peak = {PEAK_MEMORY_ENV: "0.1"}  # GiB: above 64Mi, below 128Mi
    c.create_job(manifest("small", env=peak, memory="64Mi", backoff_limit_per_index=1))
    c.create_job(manifest("roomy", env=peak, memory="128Mi"))
    small = finished(c, "small")
    assert (small.condition, small.failed_indexes) == ("Failed", "0")
    attempts = c.list_pods("small")
    assert len(attempts) == 2
    assert all((p.phase, p.exit_code, p.reason) == ("Failed", 137, "OOMKilled") for p in attempts)
    roomy = finished(c, "roomy")
    assert roomy.condition == "Complete"
    assert [p.reason for p in c.list_pods("roomy")] == ["Completed"]


def test_an_ordinary_sigkill_is_an_error_not_an_oom_kill(cluster, tmp_path) -> None:
    c, _ = cluster
    c.create_job(manifest("plain", env={"GO": str(tmp_path / "never")}))
    running(c, "plain", 1)
    assert c.kill_random_pod(random.Random(0)) is not None
    wait_for(lambda: [p for p in c.list_pods("plain") if p.phase == "Failed"], what="a failed pod")
    failed = [p for p in c.list_pods("plain") if p.phase == "Failed"]
    assert (failed[0].exit_code, failed[0].reason) == (137, "Error")
