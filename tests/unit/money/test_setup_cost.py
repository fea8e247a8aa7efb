"""A stage's setup pass costs what its pod requests for as long as its Jobs existed, earlier
(failed, re-submitted) attempts included, and its span counts toward the cluster fee: the
budget guard never under-counts a run's spend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.jobs.setup_job import setup_requests
from shared.model.state import SETUP_LAYER, RunState, SetupState, build_layers
from shared.money.costs import Billing, run_cost
from shared.money.pricing import load_rates, pod_cost, rate_for
from shared.operate.operator_actions import resubmit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RATES = load_rates()
BILLING = Billing("us-east1")


def run_with_setup(**setup: object) -> RunState:
    tops = {"ingest": 3}
    run = RunState("r", "g", ["ingest"], tops, layers=build_layers(["ingest"], tops))
    run.created_at = T0
    run.setups = {"ingest": SetupState(stage="ingest", **setup)}  # type: ignore[arg-type]
    return run


def one_pod(seconds: float) -> float:
    req = setup_requests()
    return pod_cost(rate_for(RATES, "us-east1", ""), req.cpu, req.memory_gib, seconds)


@pytest.mark.parametrize(
    ("setup", "now_s", "pod_s"),
    [
        ({}, 600, 0.0),  # not started: nothing spent, no row
        ({"phase": "running", "started_at": T0}, 90, 90.0),  # running: to now
        (
            {"phase": "succeeded", "started_at": T0, "finished_at": T0 + timedelta(seconds=40)},
            600,
            40.0,
        ),  # fmt: skip
        ({"phase": "running", "started_at": T0, "earlier_s": 25.0}, 10, 35.0),
        # a span under a second is priced as it is, not rounded up to one
        (
            {"phase": "failed", "started_at": T0, "finished_at": T0 + timedelta(seconds=0.25)},
            600,
            0.25,
        ),  # fmt: skip
    ],
)
def test_a_setup_pass_is_priced_as_one_pod_over_its_jobs(setup, now_s, pod_s):
    cost = run_cost(run_with_setup(**setup), RATES, BILLING, T0 + timedelta(seconds=now_s))
    rows = {lc.key: lc.usd for lc in cost.layers}
    if not pod_s:
        assert "ingest-setup" not in rows and cost.usd == 0.0
        return
    assert rows["ingest-setup"] == pytest.approx(one_pod(pod_s))
    fee = (
        rate_for(RATES, "us-east1", "").cluster_fee_hr * (pod_s - setup.get("earlier_s", 0)) / 3600
    )
    assert cost.cluster_fee_usd == pytest.approx(fee)
    assert cost.usd == pytest.approx(one_pod(pod_s) + fee)


def test_a_resubmitted_setup_keeps_the_failed_attempts_span():
    run = run_with_setup(
        phase="failed", attempt=0, started_at=T0, finished_at=T0 + timedelta(seconds=30)
    )
    resubmit(run, "ingest", SETUP_LAYER, "alice", T0 + timedelta(seconds=60))
    fresh = run.setups["ingest"]
    assert (fresh.attempt, fresh.phase, fresh.earlier_s) == (1, "waiting", 30.0)
    cost = run_cost(run, RATES, BILLING, T0 + timedelta(seconds=60))
    assert {lc.key: lc.usd for lc in cost.layers}["ingest-setup"] == pytest.approx(one_pod(30))
