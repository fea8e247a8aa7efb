"""The demo's time running out is told as what it is: where the run was and the fix (more
`--timeout`), exit 1; not "cannot reach a service", which sent operators to restart a stack
that was running fine."""

from __future__ import annotations

import click
import pytest

from scripts.commands.demo import timed_out
from scripts.demo_run import DemoTimeoutError
from scripts.exits import outcome

WHERE = "run demo-demo not finished after 900s: ['ingest-L2 running 0/16']"


@pytest.mark.parametrize(
    ("chaos", "why"),
    [(True, "pod-failure back-off"), (False, "a loaded machine or a large --size")],
)
def test_a_timeout_names_where_the_run_was_and_the_fix(chaos: bool, why: str) -> None:
    error = timed_out(DemoTimeoutError(WHERE), chaos)
    assert isinstance(error, click.ClickException)
    code, message = outcome(error)
    assert code == 1
    assert WHERE in message and why in message and "larger --timeout" in message
    assert "cannot reach" not in message and "local up" not in message


def test_the_timeout_itself_is_not_read_as_a_service_down() -> None:
    code, message = outcome(DemoTimeoutError(WHERE)) or (None, "")
    assert "cannot reach a service" not in message and code != 3


@pytest.mark.parametrize(
    ("summary", "said"),
    [
        ({"partial_writes_left": 1}, ["1 partial writes left"]),
        (
            {
                "partial_writes_left": 1,
                "partial_writes_left_detail": [
                    {
                        "kind": "pod_preempted",
                        "pod": "p-0",
                        "chunk_id": 9,
                        "rows_in_final_table": 2,
                        "rows_at_kill": 3,
                    }
                ],
            },
            ["pod_preempted on p-0, chunk 9, 2 of 3 rows"],
        ),
        ({"chunks_unmarked_by_layer": {"ingest-L2": 3}}, ["chunks not marked done"]),
        ({"zombie_takeovers_of_live_claims": 2}, ["2 takeovers of a live claim"]),
        ({"partial_writes_left": 0, "chunks_unmarked_by_layer": {}}, []),
    ],
)
def test_a_chaos_audit_failure_is_named_apart_from_the_oracle(summary, said) -> None:
    """A chaos run that left a partial write fails with the oracle agreeing: the demo says
    which audit failed instead of "oracle DISAGREES"."""
    from scripts.commands.demo import chaos_audit_failures

    failures = chaos_audit_failures(summary)
    assert len(failures) == len(said)
    assert all(s in f for s, f in zip(said, failures, strict=True))
