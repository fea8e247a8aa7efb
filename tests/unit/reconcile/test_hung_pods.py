"""The hung-pod decision (shared.reconcile.hung_pods), table-driven, and its place in the reconcile:
a hung pod is deleted and alerted once, counted, and its delete re-sent while it runs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.gke.cluster import log_line_time
from shared.model.state import LayerState, PodUsage
from shared.ports.cluster import ClusterError
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, DeletePod, Snapshot
from shared.reconcile.hung_pods import (
    HungPod,
    candidates,
    find_hung,
    hung_after_s,
    layer_hung_after_s,
    mark_handled,
    note_chunk_times,
    p95,
)
from shared.reconcile.pod_accounting import PodRecord
from tests.builders.decide_runs import job, make_run, name_for, plans
from tests.builders.pod_infos import T0, pod_info


def at(s: float):
    return T0 + timedelta(seconds=s)


@pytest.mark.parametrize(
    ("samples", "want"),
    [
        ([], None),
        ([3.0], 3.0),
        ([float(i) for i in range(1, 101)], 95.0),  # nearest rank
        ([1.0] * 19 + [50.0], 1.0),  # one outlier in 20 is beyond the 95th percentile
        ([1.0] * 18 + [50.0, 60.0], 50.0),
    ],
)
def test_p95(samples, want):
    assert p95(samples) == want


@pytest.mark.parametrize(
    ("after_chunks", "floor", "chunk_s", "want"),
    [
        (5, 1800, None, 1800),  # no pod finished yet: the floor alone
        (5, 1800, 60, 1800),  # 300 s < the floor
        (5, 1800, 600, 3000),  # slow chunks: k x p95
        (2.5, 10, 8, 20),
    ],
)
def test_hung_after_s(after_chunks, floor, chunk_s, want):
    assert hung_after_s(after_chunks, floor, chunk_s) == want


def test_layer_threshold_spans_a_batch_when_only_logs_are_read():
    ls = LayerState("ingest", 2, pods=PodUsage(chunk_s_samples=[100.0] * 10))
    assert layer_hung_after_s(ls, 5, 60) == 500  # done markers: per chunk
    assert layer_hung_after_s(ls, 5, 60, chunks_per_signal=32) == 5 * 100 * 32
    assert layer_hung_after_s(LayerState("ingest", 2), 5, 60, 32) == 60


def _record(phase: str, seconds: float) -> PodRecord:
    return PodRecord("u", "p", 0, phase, 1, 1, T0, T0, at(seconds), 0, None, "")


def test_chunk_times_come_from_succeeded_pods_over_their_batch():
    ls = LayerState("ingest", 2, pods=PodUsage(chunk_s_samples=[9.0]))
    records = [_record("Succeeded", 64), _record("Failed", 1000), _record("Succeeded", 0)]
    note_chunk_times(ls, records, chunks_per_pod=32)
    assert ls.pods.chunk_s_samples == [9.0, 2.0]
    note_chunk_times(ls, [_record("Succeeded", 10)] * 500, chunks_per_pod=1)
    assert len(ls.pods.chunk_s_samples) == 200  # bounded: the latest ones


@pytest.mark.parametrize(
    ("pod", "handled", "want"),
    [
        (pod_info("a"), (), True),  # running since T0, 100 s ago
        (pod_info("a", started=at(50)), (), False),  # too young to be hung
        (pod_info("a", started=at(40)), (), True),  # exactly the threshold
        (pod_info("a", phase="Pending", started=None), (), False),
        (pod_info("a", phase="Succeeded"), (), False),
        (pod_info("a"), ("a",), False),  # deleted as hung already
    ],
)
def test_candidates_are_running_pods_old_enough(pod, handled, want):
    assert bool(candidates([pod], at(100), 60, handled)) is want


@pytest.mark.parametrize(
    ("signals", "hung", "last"),
    [
        ([], True, 0),  # no signal at all: judged from its start
        ([None, None], True, 0),
        ([at(30), None], True, 30),  # a log line 70 s ago
        ([at(30), at(50)], False, None),  # a done marker 50 s ago: still within 60 s
        ([at(41)], False, None),
        ([at(40)], True, 40),  # exactly the threshold
    ],
)
def test_find_hung_uses_the_newest_signal(signals, hung, last):
    pod = pod_info("a", index=3)
    found = find_hung([pod], {pod.name: signals}, at(100), 60)
    if not hung:
        assert found == []
        return
    assert found == [HungPod(pod.name, "a", 3, at(last), 100 - last, 60)]


def test_mark_handled_counts_each_pod_once():
    ls = LayerState("ingest", 2)
    h = HungPod("p-a", "a", 0, T0, 100, 60)
    assert mark_handled(ls, [h]) == [h]
    assert mark_handled(ls, [h, HungPod("p-b", "b", 1, T0, 100, 60)])[0].uid == "b"
    assert (ls.faults.hung, ls.faults.hung_pod_uids) == (2, ["a", "b"])


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", None),
        (
            "2026-12-01T19:52:07.123456789Z chunk done\n",
            at(0).replace(2026, 12, 1, 19, 52, 7, 123456),
        ),
        ("2026-12-01T19:52:07Z x", at(0).replace(2026, 12, 1, 19, 52, 7)),
        ("2026-12-01T20:52:07.5+01:00 x", at(0).replace(2026, 12, 1, 19, 52, 7, 500000)),
    ],
)
def test_kubernetes_log_timestamps(text, want):
    assert log_line_time(text) == want


def test_a_log_line_without_a_timestamp_is_an_error():
    with pytest.raises(ClusterError, match="without a timestamp"):
        log_line_time("plain line\n")


def _running(hung: list[HungPod], pods):
    run = make_run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.progress.at = "running", name_for(ls), T0
    name = ls.job.name
    seen = Snapshot(run, {name: job(name)}, {name: pods}, hung={"ingest-L2": hung} if hung else {})
    return run, seen, name


def test_decide_deletes_a_hung_pod_and_alerts_once():
    pod = pod_info("a", job_name="job-ingest-2-0")
    h = HungPod(pod.name, "a", 0, T0, 4000, 1800, log_tail="stuck")
    run, seen, name = _running([h], [pod])
    d = decide(seen, plans(run), None, at(4000))
    assert DeletePod(name, pod.name) in d.actions
    [alert] = [a for a in d.actions if isinstance(a, Alert) and a.kind == "pod_hung"]
    assert alert.details["pod"] == pod.name and alert.details["log_tail"] == "stuck"
    assert d.state.layers["ingest-L2"].faults.hung == 1 and d.changed
    # The next reconcile sees it still running (terminating): the delete again, no alert.
    seen2 = Snapshot(d.state, seen.jobs, seen.pods, hung={"ingest-L2": [h]})
    d2 = decide(seen2, plans(run), None, at(4010))
    assert d2.actions.count(DeletePod(name, pod.name)) == 1
    assert not [a for a in d2.actions if isinstance(a, Alert) and a.kind == "pod_hung"]
    assert d2.state.layers["ingest-L2"].faults.hung == 1
    # Once it has ended, nothing more.
    ended = [pod_info("a", phase="Failed", job_name=name, finished=at(4011), exit_code=137)]
    d3 = decide(Snapshot(d2.state, seen.jobs, {name: ended}), plans(run), None, at(4020))
    assert not [a for a in d3.actions if isinstance(a, DeletePod)]


# Tables that kill mutants the mutation runner found alive (docs/testing-mutation.md).


def test_find_hung_skips_pods_not_running_or_not_started_and_goes_on():
    at = T0 + timedelta(seconds=100)
    pods = [
        pod_info("pending", phase="Pending"),  # started, but not running
        pod_info("unstarted", started=None),  # running, no start time yet
        pod_info("silent"),  # no signals at all: judged from its start
    ]
    found = find_hung(pods, {}, at, 60)
    assert [(h.name, h.idle_s) for h in found] == [("p-silent", 100.0)]


def test_chunk_times_per_pod_and_short_runs():
    from shared.reconcile.hung_pods import note_chunk_times
    from shared.reconcile.pod_accounting import PodRecord

    def rec(uid, seconds, phase="Succeeded"):
        end = T0 + timedelta(seconds=seconds)
        return PodRecord(uid, f"p-{uid}", 0, phase, 1.0, 2.0, T0, T0, end, 0, None, "n")

    ls = LayerState(stage="ingest", layer=2)
    note_chunk_times(ls, [rec("a", 0.5), rec("b", 0.0), rec("c", 9.0, "Failed")], 1)
    assert ls.pods.chunk_s_samples == [0.5]  # one chunk per pod: its whole runtime; 0 s skipped
