"""The local cluster's pure parts: the Job controller's decisions, the pod GC's choice and
the event settings (no processes, no threads)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.local.cluster.events import EventSettings
from adapters.local.cluster.jobs import LocalJob
from adapters.local.cluster.spec import parse_manifest
from adapters.local.cluster.vanish import Terminated, gc_victims
from tests.builders.local_jobs import DEFAULT_RULES, manifest

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("pods", "threshold", "victims"),
    [
        ([("a", 0, False), ("b", 1, False)], 2, []),
        ([("a", 0, False), ("b", 1, False), ("c", 2, False)], 2, ["a"]),
        ([("c", 2, False), ("a", 0, False), ("b", 1, False)], 1, ["a", "b"]),
        ([("a", 0, False), ("b", 1, True), ("c", 2, False)], 2, ["b"]),  # evicted first
        ([("a", 0, False)], 0, ["a"]),
        ([], 0, []),
    ],
)
def test_pod_gc_deletes_evicted_then_oldest_beyond_the_threshold(
    pods: list[tuple[str, int, bool]], threshold: int, victims: list[str]
) -> None:
    terminated = [Terminated(n, T0 + timedelta(seconds=s), ev) for n, s, ev in pods]
    assert gc_victims(terminated, threshold) == victims


@pytest.mark.parametrize(
    ("text", "delay"),
    [("5-60", (5.0, 60.0)), ("0", (0.0, 0.0)), ("2.5", (2.5, 2.5)), ("1-3", (1.0, 3.0))],
)
def test_sink_delay_settings(text: str, delay: tuple[float, float]) -> None:
    settings = EventSettings.with_delay(text)
    assert settings.sink_delay_s == delay and settings.recorder is not None


@pytest.mark.parametrize("text", ["soon", "60-5", "-1", "5-x"])
def test_bad_sink_delay_settings_say_how_to_write_them(text: str) -> None:
    with pytest.raises(ValueError, match="sink delay|sink_delay_s"):
        EventSettings.with_delay(text)


def test_the_default_is_gke_and_the_opt_out_is_explicit() -> None:
    default, instant = EventSettings(), EventSettings.instant()
    assert default.recorder is not None and default.sink_delay_s == (5.0, 60.0)
    assert instant.recorder is None and instant.sink_delay_s == (0.0, 0.0)


def job(completions: int = 4, parallelism: int = 2, **kw) -> LocalJob:
    spec = parse_manifest(manifest("j", completions=completions, parallelism=parallelism, **kw))
    return LocalJob(spec, "uid", T0)


def start(j: LocalJob, rng: random.Random) -> list[int]:
    started = j.indexes_to_start()
    for index in started:
        pod = j.new_pod(index, T0, Path("/nonexistent"), rng)
        pod.phase = "Running"
    return started


def test_indexes_start_lowest_first_within_parallelism() -> None:
    j, rng = job(), random.Random(1)
    assert start(j, rng) == [0, 1] and start(j, rng) == []
    j.on_pod_exit(j.pods[0], 0, T0)
    assert j.succeeded == {0} and start(j, rng) == [2]


@pytest.mark.parametrize(
    ("exit_code", "disrupted", "failed_pods", "failed_indexes", "retried"),
    [
        (1, False, 1, set(), True),  # counted, retried (backoffLimitPerIndex 1)
        (42, False, 1, {0}, False),  # FailIndex rule
        (143, True, 0, set(), True),  # DisruptionTarget: Ignore rule, not counted
    ],
)
def test_failure_policy_on_pod_exit(
    exit_code: int, disrupted: bool, failed_pods: int, failed_indexes: set[int], retried: bool
) -> None:
    j, rng = job(completions=1, parallelism=1, rules=DEFAULT_RULES), random.Random(1)
    start(j, rng)
    j.pods[0].disrupted = disrupted
    j.on_pod_exit(j.pods[0], exit_code, T0)
    assert (j.failed_pods, j.failed_indexes) == (failed_pods, failed_indexes)
    assert (j.indexes_to_start() == [0]) is retried


def test_scale_down_deletes_unscheduled_then_newest_and_suspend_deletes_all() -> None:
    j, rng = job(completions=6, parallelism=3), random.Random(1)
    start(j, rng)
    for i, pod in enumerate(j.pods):
        pod.created = T0 + timedelta(seconds=i)
    j.pods[2].phase = "Pending"
    j.parallelism = 1
    assert [p.index for p in j.pods_to_delete()] == [2, 1]
    j.suspended = True
    assert [p.index for p in j.pods_to_delete()] == [0, 1, 2]
    assert j.indexes_to_start() == []


@pytest.mark.parametrize(
    ("succeeded", "failed", "max_failed", "verdict"),
    [
        ({0, 1, 2, 3}, set(), None, ("Complete", "Completed", "Job completed")),
        ({0, 1}, set(), None, None),
        ({0, 1, 2}, {3}, 1, ("Failed", "FailedIndexes", "Job has failed indexes")),
        (
            {0},
            {1, 2},
            1,
            (
                "Failed",
                "MaxFailedIndexesExceeded",
                "Job has exceeded the specified maximal number of failed indexes",
            ),
        ),
    ],
)
def test_check_terminal(
    succeeded: set[int], failed: set[int], max_failed: int | None, verdict: tuple | None
) -> None:
    j = job(max_failed_indexes=max_failed)
    j.succeeded, j.failed_indexes = set(succeeded), set(failed)
    assert j.check_terminal(T0) == verdict


def test_an_updated_event_replaces_the_stored_one() -> None:
    j = job()
    j.put_event({"metadata": {"name": "e1"}, "count": 1})
    j.put_event({"metadata": {"name": "e2"}, "count": 1})
    j.put_event({"metadata": {"name": "e1"}, "count": 2})
    assert [(e["metadata"]["name"], e["count"]) for e in j.events] == [("e1", 2), ("e2", 1)]


def test_the_demo_shortens_the_sink_delay_unless_told_otherwise(monkeypatch) -> None:
    from adapters.local.stack import SINK_DELAY_ENV, demo_event_settings

    monkeypatch.delenv(SINK_DELAY_ENV, raising=False)
    assert demo_event_settings().sink_delay_s == (0.0, 1.0)
    assert demo_event_settings().recorder is not None
    monkeypatch.setenv(SINK_DELAY_ENV, "5-60")
    assert demo_event_settings().sink_delay_s == (5.0, 60.0)


def test_mounts_materialise_like_the_kubelet_a_subpath_as_that_one_file(tmp_path: Path) -> None:
    """A whole-object mount maps its path to the object's folder; a `subPath` mount maps its
    path (a file) to that key in the folder, as Kubernetes mounts it."""
    from adapters.local.cluster.mounts import parse_mounts, remap_env, write_object
    from shared.ports.cluster import ManifestRejectedError

    write_object(tmp_path, {"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "eA=="}})
    write_object(tmp_path, {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"d.yml": "x"}})
    pod = {
        "volumes": [
            {"name": "sec", "secret": {"secretName": "s"}},
            {"name": "cm", "configMap": {"name": "c"}},
        ]
    }
    container = {
        "volumeMounts": [
            {"name": "sec", "mountPath": "/home/worker/.cloudvolume/secrets"},
            {"name": "cm", "mountPath": "/app/datasets/d.yml", "subPath": "d.yml"},
        ]
    }
    mounts = parse_mounts(pod, container)
    env = remap_env(
        {
            "CREDS": "/home/worker/.cloudvolume/secrets/k",
            "DATASET": "/app/datasets/d.yml",
            "OTHER": "/app/datasets/shipped.yml",  # the image's own file: not the ConfigMap's
        },
        mounts,
        tmp_path,
    )
    assert Path(env["CREDS"]).read_text() == "x"
    assert Path(env["DATASET"]).read_text() == "x"
    assert env["OTHER"] == "/app/datasets/shipped.yml"
    container["volumeMounts"][1]["subPath"] = "../escape"
    with pytest.raises(ManifestRejectedError, match="subPath"):
        parse_mounts(pod, container)


@pytest.mark.parametrize(
    ("deleting", "disrupted", "exit_code", "counted"),
    [
        (True, False, 143, 1),  # deleted because the Job failed: counted (Kubernetes' rule)
        (False, False, 1, 1),  # ended on its own after the failure: counted too
        (True, True, 143, 0),  # carries DisruptionTarget: the Ignore rule still applies
        (False, False, 0, 0),  # succeeded: not a failure
    ],
)
def test_pods_ending_after_the_job_failed_count_as_failed(
    deleting: bool, disrupted: bool, exit_code: int, counted: int
) -> None:
    # Source: kubernetes/kubernetes pkg/controller/job/job_controller.go,
    # trackJobStatusAndRemoveFinalizers: "When the job is considered finished, every
    # non-terminated pod is considered failed" (unless the pod failure policy ignores it).
    j, rng = job(completions=2, parallelism=2, max_failed_indexes=0), random.Random(1)
    start(j, rng)
    j.on_pod_exit(j.pods[0], 42, T0)  # FailIndex; maxFailedIndexes 0 -> the Job fails
    assert j.check_terminal(T0)[:2] == ("Failed", "MaxFailedIndexesExceeded")
    assert j.failed_pods == 1
    other = j.pods[1]
    other.deleting, other.disrupted = deleting, disrupted
    j.on_pod_exit(other, exit_code, T0)
    assert j.failed_pods == 1 + counted


def test_a_pod_deleted_before_it_started_counts_once_the_job_failed() -> None:
    j, rng = job(completions=3, parallelism=2), random.Random(1)
    start(j, rng)
    j.drop_unstarted(j.pods[1], T0)  # a scale-down: gone, not counted
    assert (len(j.pods), j.failed_pods) == (1, 0)
    j.terminal = ("Failed", "BackoffLimitExceeded")
    j.drop_unstarted(j.pods[0], T0)
    assert (j.pods, j.failed_pods) == ([], 1)
