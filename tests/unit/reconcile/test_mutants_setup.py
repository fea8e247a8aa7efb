"""Behaviour of a setup pass's plan and step that the mutation run of the final tree found
unchecked: the plan keeps the grid and renders the Job of the current attempt while it may be
created, and says why when it cannot."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.config.config_files import load_config
from shared.jobs.setup_job import setup_job_name
from shared.model.state import SETUP_LAYER, SetupState
from shared.ports.cluster import JobStatus
from shared.ports.graph_table import GraphTable, TableState
from shared.reconcile.build_plan import new_run, plan_for, setup_plan
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, CreateJob, Snapshot
from shared.reconcile.ownership import RUN_ID

ROOT = Path(__file__).resolve().parents[3]
DEMO = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("phase", "rendered"),
    [("waiting", True), ("running", True), ("succeeded", False), ("failed", False)],
)
@pytest.mark.parametrize("attempt", [0, 2])
def test_the_plan_renders_the_current_attempts_job_while_it_may_be_created(
    phase, rendered, attempt
):
    setup = SetupState(stage="ingest", phase=phase, attempt=attempt)
    plan = setup_plan(DEMO, "r1", setup)
    assert plan.job_name == setup_job_name(DEMO.graph_id, "ingest", "r1", attempt)
    assert (plan.manifest is not None) == rendered and plan.refusal == ""
    if rendered:  # the Job of this attempt, not of the first
        assert plan.manifest["metadata"]["name"] == plan.job_name
    # whatever the phase, the grid the setup's metadata is checked against
    assert plan.layer2_shape == DEMO.layer2_shape() and plan.layer_count == 5


def test_a_setup_job_that_cannot_render_is_refused_saying_why():
    bad = DEMO.model_copy(update={"namespace": "Not_A_Label"})
    plan = setup_plan(bad, "r1", SetupState(stage="ingest"))
    assert plan.manifest is None and "namespace" in plan.refusal
    assert plan.job_name == setup_job_name(DEMO.graph_id, "ingest", "r1", 0)
    assert (plan.layer2_shape, plan.layer_count) == (DEMO.layer2_shape(), 5)


def test_the_plan_carries_the_projects_vcpu_cap():
    capped = DEMO.model_copy(
        update={"controller": DEMO.controller.model_copy(update={"max_vcpus": 12.5})}
    )
    run = new_run(capped, "r1", ["ingest"], "auto", T0)
    assert plan_for(capped, run).max_vcpus == 12.5
    assert plan_for(DEMO, new_run(DEMO, "r1", ["ingest"], "auto", T0)).max_vcpus is None


def test_a_stages_first_layer_is_ready_when_its_setup_succeeded():
    run = new_run(DEMO, "r1", ["ingest"], "auto", T0)
    l2, setup = run.layers["ingest-L2"], run.setups["ingest"]
    assert run.ready_since(l2) is None  # the setup has not run
    setup.phase, setup.finished_at = "running", WHEN
    assert run.ready_since(l2) is None
    setup.phase = "succeeded"
    assert run.ready_since(l2) == WHEN  # not the run's creation


def test_a_new_run_has_one_waiting_setup_per_stage_with_one():
    run = new_run(DEMO, "r1", ["ingest"], "auto", T0)
    assert {s: (st.phase, st.attempt, st.earlier_s) for s, st in run.setups.items()} == {
        "ingest": ("waiting", 0, 0.0)
    }


# ---- the step, through decide -------------------------------------------------------------

WHEN = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)  # the reconcile's clock


def job(name: str, condition: str | None = "Complete", annotations=None, **kw) -> JobStatus:
    return JobStatus(name, {}, annotations or {}, 1, 1, False, condition=condition, **kw)


# The graph's table as a PyChunkedGraph image leaves it: metadata this project cannot decode,
# so a completed setup is judged by its log's report, if any.
SET_UP = GraphTable("demo", TableState.METADATA)


def step(run, jobs=None, logs=None, table=SET_UP):
    plan = plan_for(DEMO, run, table)
    seen = Snapshot(run, jobs or {}, {}, setup_logs=logs or {}, graph_table=table)
    return decide(seen, plan, None, WHEN)


def started():
    d = step(new_run(DEMO, "r1", ["ingest"], "auto", T0))
    return d.state, d.state.setups["ingest"].job_name, d


def test_the_setup_job_is_created_one_pod_wide_and_again_if_it_went_missing():
    run, name, d = started()
    want = [CreateJob("ingest", SETUP_LAYER, name, 1)]
    assert [a for a in d.actions if isinstance(a, CreateJob)] == want
    assert run.setups["ingest"].started_at == WHEN
    again = step(run, {name: None})  # committed, never created (or deleted by hand)
    assert [a for a in again.actions if isinstance(a, CreateJob)] == want


@pytest.mark.parametrize(
    ("observed", "log", "phase", "reason"),
    [
        # no log at all (an image's setup prints no metadata): it succeeded, at its Job's time
        (job("N", completion_time=T0), None, "succeeded", ""),
        (job("N", completion_time=T0), "no report here", "succeeded", ""),
        (job("N", "Failed"), "", "failed", "the setup pod failed (Failed)"),
        (job("N", "Failed", reason="DeadlineExceeded"), "", "failed", "(DeadlineExceeded)"),
        (job("N", completion_time=T0), '{"graph_meta": 7}', "failed", "malformed graph metadata"),
        # a Job under the planned name marked as another run's is never adopted
        (job("N", completion_time=T0, annotations={RUN_ID: "someone-else"}), "", "failed",
         "belongs to"),
    ],
)  # fmt: skip
def test_a_finished_setup_job_decides_the_step(observed, log, phase, reason):
    run, name, _ = started()
    seen = replace(observed, name=name)
    d = step(run, {name: seen}, {} if log is None else {name: log})
    setup = d.state.setups["ingest"]
    assert setup.phase == phase and reason in setup.failure_reason
    alerts = [a for a in d.actions if isinstance(a, Alert)]
    if phase == "succeeded":
        assert setup.finished_at == T0 and not alerts  # the Job's completion time
        return
    assert setup.finished_at == WHEN
    fix = f"fix the cause, then `pipeline submit r1 ingest {SETUP_LAYER}`"
    assert alerts == [
        Alert(
            "setup_failed",
            "ingest",
            SETUP_LAYER,
            {"reason": setup.failure_reason, "job": name, "fix": fix},
        )
    ]
