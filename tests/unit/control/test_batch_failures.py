"""shared.control.batch_failures and the `failed_indexes` alert's batches: a batch that failed
the same way on every attempt is reported as such, the sign of bad input in PyChunkedGraph's
meshing, migration and the L2 cache, which never exit 42 (they retry every exception)."""

from __future__ import annotations

import json

import pytest

from shared.control.alerts import with_batch_verdicts
from shared.control.batch_failures import Attempt, BatchFailure, classify, error_line

TB = 'Traceback (most recent call last):\n  File "mesh.py", line 9, in mesh\n'
BAD = TB + "ValueError: chunk (3, 4, 5) has no supervoxels\n"
BIGTABLE = TB + "google.api_core.exceptions.ServiceUnavailable: 503 unavailable\n"


@pytest.mark.parametrize(
    ("tail", "line"),
    [
        (BAD, "ValueError: chunk (3, 4, 5) has no supervoxels"),
        ("log 1\n" + BAD + "\n\n", "ValueError: chunk (3, 4, 5) has no supervoxels"),
        (TB + "KeyError: <object at 0x7f3a2b>\n", "KeyError: <object at #>"),  # address masked
        (TB + "RuntimeError: pid 1234567 died\n", "RuntimeError: pid # died"),
        ("no traceback, last line\n", "no traceback, last line"),
        # our worker's JSON log records: the traceback field, else the message
        (
            '{"severity": "INFO", "message": "batch 6: 32 chunks"}\n'
            + json.dumps({"severity": "ERROR", "message": "fatal chunk", "traceback": BAD})
            + "\n",
            "ValueError: chunk (3, 4, 5) has no supervoxels",
        ),
        ('{"severity": "ERROR", "message": "claim lost"}\n', "claim lost"),
        ("[1, 2]\n", "[1, 2]"),  # JSON but not a record: as it is
        ("", ""),
    ],
)
def test_error_line(tail, line):
    assert error_line(tail) == line


@pytest.mark.parametrize(
    ("attempts", "failure", "error"),
    [
        # meshing's bad chunk: exit 1 with the same exception, task_retries + 1 times
        ([Attempt(1, BAD)] * 4, BatchFailure.SAME_EVERY_ATTEMPT, "ValueError: chunk (3, 4, 5)"),
        ([Attempt(1, BAD), Attempt(1, BIGTABLE), Attempt(1, BAD)], BatchFailure.VARYING, ""),
        ([Attempt(1, BAD), Attempt(137, BAD)], BatchFailure.VARYING, ""),  # killed once
        ([Attempt(1, BAD)], BatchFailure.VARYING, ""),  # one attempt cannot tell
        ([Attempt(1, ""), Attempt(1, "")], BatchFailure.VARYING, ""),  # no log to compare
        # ingest's own verdict on its input
        ([Attempt(42, BAD)], BatchFailure.FATAL_EXIT, "ValueError: chunk (3, 4, 5)"),
        ([Attempt(1, BIGTABLE), Attempt(42, BAD)], BatchFailure.FATAL_EXIT, "ValueError"),
    ],
)
def test_classify(attempts, failure, error):
    verdict = classify(attempts)
    assert verdict.failure is failure and verdict.attempts == len(attempts)
    assert verdict.error.startswith(error)
    assert verdict.exit_codes == tuple(a.exit_code for a in attempts)


def test_the_alert_batches_carry_the_verdicts_and_name_the_repeated_ones():
    body = {
        "kind": "failed_indexes",
        "indexes": "3-4",
        "batches": [{"index": 3, "chunks": []}, {"index": 4, "chunks": []}, {"index": 5}],
    }
    verdicts = {3: classify([Attempt(1, BAD)] * 3), 4: classify([Attempt(1, BAD)])}
    out = with_batch_verdicts(body, verdicts)
    three, four, five = out["batches"]
    assert (three["failure"], three["attempts"], three["exit_codes"]) == (
        "same_every_attempt",
        3,
        [1, 1, 1],
    )
    assert three["error"].startswith("ValueError") and four["failure"] == "varying"
    assert "failure" not in five  # no attempts read: left as it was
    assert out["same_every_attempt_indexes"] == [3]
