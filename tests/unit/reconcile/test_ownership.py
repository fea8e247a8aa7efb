"""Which Jobs a run adopts (shared.reconcile.ownership): each owner mark a Job carries must name
this run incarnation and the layer's attempt."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.model.state import JobAttempt, LayerState, RunState
from shared.ports.cluster import JobStatus
from shared.reconcile.ownership import (
    ATTEMPT,
    RUN_CREATED,
    RUN_ID,
    RUN_LABEL,
    foreign_owner,
    stamped,
)

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def _run() -> RunState:
    run = RunState("r1", "g", ["ingest"], {"ingest": 2}, created_at=CREATED)
    ls = LayerState(stage="ingest", layer=2, job=JobAttempt(attempt=1, name="j"))
    run.layers = {ls.key: ls}
    return run


OURS_LABELS = {RUN_LABEL: "r1"}
OURS = {RUN_ID: "r1", ATTEMPT: "1", RUN_CREATED: CREATED.isoformat()}


@pytest.mark.parametrize(
    ("labels", "annotations", "owner"),
    [
        (OURS_LABELS, OURS, None),
        ({}, {}, None),  # no marks at all: a Job from before the marks existed
        (OURS_LABELS, {RUN_ID: "r1"}, None),
        ({RUN_LABEL: "r2"}, {**OURS, RUN_ID: "r2"}, "belongs to run r2"),
        ({RUN_LABEL: "r2"}, {}, "belongs to run r2"),
        (OURS_LABELS, {**OURS, RUN_ID: "r1-other"}, "belongs to run r1-other"),
        (OURS_LABELS, {**OURS, ATTEMPT: "0"}, "belongs to attempt 0 of run r1"),
        (OURS_LABELS, {**OURS, RUN_CREATED: "2025-05-05T00:00:00+00:00"}, "an earlier run r1"),
    ],
)
def test_foreign_owner(labels, annotations, owner):
    run = _run()
    ls = run.layers["ingest-L2"]
    job = JobStatus("j", labels, annotations, 4, 1, False, condition="Complete")
    why = foreign_owner(job, run, ls)
    if owner is None:
        assert why is None
    else:
        assert owner in why and "kubectl delete job j" in why
        assert "pipeline submit r1 ingest 2" in why


def test_stamped_manifest_is_adopted_and_the_input_untouched():
    run = _run()
    ls = run.layers["ingest-L2"]
    manifest = {"metadata": {"name": "j", "labels": OURS_LABELS, "annotations": {"x": "1"}}}
    out = stamped(manifest, run, ls)
    assert manifest["metadata"]["annotations"] == {"x": "1"}
    meta = out["metadata"]
    job = JobStatus("j", meta["labels"], meta["annotations"], 4, 1, False)
    assert meta["annotations"]["x"] == "1" and foreign_owner(job, run, ls) is None
    ls.job.attempt = 2
    assert "attempt 1" in foreign_owner(job, run, ls)
