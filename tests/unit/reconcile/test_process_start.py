"""shared.reconcile.process_start: the first pod of a layer to succeed, and the process
start-up its worker reported, kept once on the layer for the build's timeline; through
`decide`, from the log tail the observer read (Snapshot.first_pod_logs)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from shared.model.phase import Phase
from shared.reconcile.decide import decide
from shared.reconcile.decision import Snapshot
from shared.reconcile.process_start import first_succeeded, note_process_start
from tests.builders.decide_runs import job, make_run, name_for, plans
from tests.builders.pod_infos import T0, pod_info

SUMMARY = (
    '{"severity": "INFO", "message": "batch summary: 4 processed, 0 skipped of 4", '
    '"chunk_compute_s": 0.4, "startup_s": %s, "exit_code": 0}'
)


def _done(uid: str, finished_s: float, phase: str = "Succeeded"):
    return pod_info(uid, phase, finished=T0 + timedelta(seconds=finished_s))


@pytest.mark.parametrize(
    ("pods", "first"),
    [
        ([], None),
        ([pod_info("a")], None),  # running
        ([_done("a", 5), _done("b", 3)], "p-b"),
        ([_done("a", 5), _done("b", 3, "Failed")], "p-a"),  # a failure is not a success
        ([_done("b", 3), _done("a", 3)], "p-a"),  # the same second: by name, repeatably
    ],
)
def test_first_succeeded(pods, first):
    got = first_succeeded(pods)
    assert (got.name if got else None) == first


@pytest.mark.parametrize(
    ("log", "before", "after"),
    [
        ("noise\n" + SUMMARY % 1.2345, None, 1.234),
        ("layer 2 batch 0 done: 4 ok", None, None),  # an image's harness: no timings
        (SUMMARY % 9.0, 1.5, 1.5),  # kept once
    ],
)
def test_note_process_start(log, before, after):
    ls = make_run().layers["ingest-L2"]
    ls.timing.process_start_s = before
    note_process_start(ls, log)
    assert ls.timing.process_start_s == after


def test_decide_keeps_the_first_pods_start_up_from_the_log_the_observer_read():
    run = make_run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions = Phase.RUNNING, name_for(ls), 10
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = T0
    name = ls.job.name
    seen = Snapshot(run, {name: job(name)}, {name: [_done("a", 4), pod_info("b")]})
    now = T0 + timedelta(seconds=5)
    assert decide(seen, plans(run), None, now).state.layers[ls.key].timing.process_start_s is None
    logs = {ls.key: SUMMARY % 0.8}
    d = decide(replace(seen, first_pod_logs=logs), plans(run), None, now)
    assert d.state.layers[ls.key].timing.process_start_s == 0.8 and d.changed
    # stored with the layer, and read back
    from shared.model.state import LayerState

    back = LayerState.from_doc(d.state.layers[ls.key].to_doc())
    assert back.timing.process_start_s == 0.8
