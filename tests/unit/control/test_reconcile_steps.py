"""The reconcile's pure steps around the decision (docs/controller.md): the dataset
ConfigMap as an action of the setup step (and taken back with a refused Job), the commit
record (outbox bodies, claim_lost checks, pod records), the claim_lost check completed from
pod logs at publish, and the approval forecast from the plan the reconcile built."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.config.config_files import load_config
from shared.control.alerts import (
    CLAIM_LOST_EVENT,
    approval_forecast,
    claim_lost_check,
    claim_lost_logs,
    with_claim_lost,
)
from shared.control.commit_record import claim_lost_checks, commit_record
from shared.jobs.setup_job import dataset_config_map_manifest
from shared.ports.graph_table import GraphTable, TableState
from shared.reconcile.build_plan import new_run, plan_for
from shared.reconcile.decide import decide, reject
from shared.reconcile.decision import (
    Alert,
    ApplyConfigMap,
    CreateJob,
    Decision,
    LayerPlan,
    Snapshot,
)
from shared.reconcile.pod_accounting import PodRecord
from tests.builders.stored_runs import DEMO

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CFG = load_config(DEMO)


def setup_decision(run=None):
    run = run or new_run(CFG, "r1", ["ingest"], "auto", T0)
    table = GraphTable("demo", TableState.METADATA)
    plan = plan_for(CFG, run, table)
    return decide(Snapshot(run, {}, {}, graph_table=table), plan, None, T0), plan


def test_the_setup_step_writes_the_dataset_config_map_before_its_job():
    d, _ = setup_decision()
    name = d.state.setups["ingest"].job_name
    kinds = [type(a).__name__ for a in d.actions]
    assert kinds == ["ApplyConfigMap", "CreateJob"]
    [cm] = [a for a in d.actions if isinstance(a, ApplyConfigMap)]
    assert cm.job_name == name and cm.manifest == dataset_config_map_manifest(CFG, "r1")
    # The Job is gone (committed, never created): created again, its ConfigMap first.
    again = decide(Snapshot(d.state, {name: None}, {}), plan_for(CFG, d.state), None, T0)
    assert [type(a).__name__ for a in again.actions] == ["ApplyConfigMap", "CreateJob"]


def test_layers_write_no_config_map():
    run = new_run(CFG, "r1", ["ingest"], "auto", T0)
    run.setups.clear()
    d = decide(Snapshot(run), plan_for(CFG, run), None, T0)
    assert [type(a) for a in d.actions] == [CreateJob]


@pytest.mark.parametrize(
    ("refused", "kept"),
    [
        (True, []),  # the refused setup's ConfigMap goes with its Job
        (False, ["ApplyConfigMap", "CreateJob"]),
    ],
)
def test_reject_takes_a_refused_jobs_config_map_back(refused, kept):
    d, _ = setup_decision()
    name = d.state.setups["ingest"].job_name
    out = reject(d, {name: "no such image"} if refused else {})
    assert [type(a).__name__ for a in out.actions if not isinstance(a, Alert)] == kept


def pod(name, index, phase, code):
    at = T0 - timedelta(seconds=10)
    return PodRecord(f"u-{name}", name, index, phase, 1.0, 1.0, at, at, T0, code, None, "n1")


@pytest.mark.parametrize(
    ("records", "budget", "want"),
    [
        ({}, 20, []),
        # only failed pods that exited 1 (the worker's transient code) are checked
        ({"ingest-L2": [pod("a", 0, "Failed", 1), pod("b", 1, "Failed", 137),
                        pod("c", 2, "Succeeded", 0), pod("d", 3, "Failed", None)]},
         20, [("ingest", 2, [("a", 0)])]),
        # one check per layer, the budget shared across layers in order
        ({"ingest-L2": [pod("a", 0, "Failed", 1), pod("b", 1, "Failed", 1)],
          "ingest-L3": [pod("c", 0, "Failed", 1)]},
         2, [("ingest", 2, [("a", 0), ("b", 1)])]),
        ({"ingest-L2": [pod("a", 0, "Failed", 1)], "ingest-L3": [pod("c", 0, "Failed", 1)]},
         5, [("ingest", 2, [("a", 0)]), ("ingest", 3, [("c", 0)])]),
    ],
)  # fmt: skip
def test_claim_lost_checks_of_newly_failed_transient_pods(records, budget, want):
    run = new_run(CFG, "r1", ["ingest"], "auto", T0)
    decision = Decision(run, [], T0, records, True)
    checks = claim_lost_checks(decision, budget)
    got = [
        (c["stage"], c["layer"], [(p["pod"], p["index"]) for p in c["candidates"]]) for c in checks
    ]
    assert got == want
    assert all(c["kind"] == CLAIM_LOST_EVENT for c in checks)


def test_the_commit_record_holds_alert_bodies_checks_and_pod_docs():
    run = new_run(CFG, "r1", ["ingest"], "auto", T0)
    run.setups.clear()
    plan = plan_for(CFG, run)
    records = {"ingest-L2": [pod("a", 0, "Failed", 1)]}
    decision = Decision(run, [Alert("layer_stalled", "ingest", 2, {"no_progress_s": 5})], T0,
                        records, True)  # fmt: skip
    record = commit_record(CFG, plan, decision)
    assert [b["kind"] for b in record.alerts] == ["layer_stalled", CLAIM_LOST_EVENT]
    assert record.alerts[0]["no_progress_s"] == 5 and record.alerts[0]["at"] == T0.isoformat()
    assert record.pod_records == {"ingest-L2": [records["ingest-L2"][0].to_doc()]}


LOST = '{"event": "claim_lost", "chunk_id": 7}\n{"event": "claim_lost", "chunk_id": 9}'


@pytest.mark.parametrize(
    ("logs", "want"),
    [
        ({}, None),  # every log unreadable: nothing to say
        ({"a": "ok", "b": "boom"}, None),  # no worker lost a claim: dropped unsent
        ({"a": LOST, "b": "boom"}, [("a", 0, [7, 9])]),
        ({"a": LOST, "b": '{"event": "claim_lost", "chunk_id": 3}'},
         [("a", 0, [7, 9]), ("b", 1, [3])]),
    ],
)  # fmt: skip
def test_a_claim_lost_check_is_completed_from_its_pods_logs(logs, want):
    run = new_run(CFG, "r1", ["ingest"], "auto", T0)
    check = claim_lost_check(run, "ingest", 2, "job-x", [("a", 0), ("b", 1)], T0)
    assert claim_lost_logs(check) == ["a", "b"]
    body = with_claim_lost(check, logs)
    if want is None:
        assert body is None
        return
    assert [(p["pod"], p["index"], p["chunks"]) for p in body["pods"]] == want
    assert body["chunks"] == sorted({c for _, _, ids in want for c in ids})
    assert (body["job"], body["stage"], body["layer"], body["at"]) == ("job-x", "ingest", 2,
                                                                       T0.isoformat())  # fmt: skip
    assert "candidates" not in body


def test_only_a_check_needs_logs_read():
    """A complete claim_lost alert (committed by an earlier controller) and other kinds are
    published as they are."""
    assert claim_lost_logs({"kind": CLAIM_LOST_EVENT, "pods": [], "chunks": [1]}) == []
    assert claim_lost_logs({"kind": "failed_indexes", "candidates": [{"pod": "a"}]}) == []


def test_the_approval_forecast_reads_the_plans_it_is_given():
    run = new_run(CFG, "r1", ["ingest"], "approve", T0)
    run.setups.clear()
    plans = plan_for(CFG, run).layers
    alert = Alert("approval_needed", "ingest", 2, {"advance": "approve"})
    built_here = approval_forecast(CFG, run, alert, T0)
    assert approval_forecast(CFG, run, alert, T0, plans) == built_here
    # A plan of twice the pods: the forecast follows the plans given, not its own.
    doubled = {k: replace(lp, completions=2 * lp.completions) for k, lp in plans.items()}
    assert isinstance(doubled["ingest-L2"], LayerPlan)
    more = approval_forecast(CFG, run, alert, T0, doubled)
    assert more["layer_cost_usd"] > built_here["layer_cost_usd"]
