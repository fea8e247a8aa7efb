"""shared.reconcile.oom_advice and the `oom_killed` alert: both levers, in the order that
applies (fewer processes per vCPU before more memory when a pod runs several)."""

from __future__ import annotations

import pytest

from shared.model.state import LayerState
from shared.reconcile.oom import oom_alert_details
from shared.reconcile.oom_advice import OomLever, oom_advice

FEWER, MORE = OomLever.FEWER_PROCESSES, OomLever.MORE_MEMORY


@pytest.mark.parametrize(
    ("processes", "per_vcpu", "memory", "levers", "says"),
    [
        (8, 2, 16.0, (FEWER, MORE), "fewer processes first: 8 processes share 16 GiB (2 GiB"),
        (8, 2, 16.0, (FEWER, MORE), "lower job.processes_per_vcpu from 2 (to 1"),
        (12, 3, 6.0, (FEWER, MORE), "from 3 (to 2"),
        (4, 1, 8.0, (MORE, FEWER), "fewer processes per vCPU is not possible"),
        (4, 0, 8.0, (MORE, FEWER), "at 1 per vCPU"),  # 0 reads as 1
        (1, 2, 4.0, (MORE,), "only more memory helps"),
        (1, 1, 4.0, (MORE,), "raise job.resources.memory"),
    ],
)
def test_oom_advice(processes, per_vcpu, memory, levers, says):
    advice = oom_advice(processes, per_vcpu, memory)
    assert advice.levers == levers
    assert says in advice.fix
    assert "job.resources.memory" in advice.fix and "pipeline submit" in advice.fix


def test_the_alert_names_both_scopes_and_the_levers_once():
    ls = LayerState("ingest", 5)
    ls.faults.oom_killed, ls.faults.node_oom_killed = 3, 2
    ls.pods.memory_request_gib = 16.0
    details = oom_alert_details(ls, processes=8, processes_per_vcpu=2)
    assert details is not None
    assert (details["pods"], details["container_oom_kills"], details["node_oom_kills"]) == (
        3,
        1,
        2,
    )
    assert details["levers"] == ["fewer_processes", "more_memory"]
    assert details["fix"].startswith("fewer processes first")
    assert oom_alert_details(ls, 8, 2) is None  # once per attempt
