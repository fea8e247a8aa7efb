"""The plan a reconcile decides by: per layer, the spec's numbers and the Job of the current
attempt, rendered only where a Job may be created, refusals captured instead of raised."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.config.config_files import config_from_dict, load_config
from shared.jobs.layer_spec import attempt_salt, job_name, layer_spec
from shared.jobs.manifest import ManifestError, render_job
from shared.model.state import LayerState
from shared.reconcile.build_plan import layer_plan, new_run, plan_for

DEMO = load_config(Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml")


def demo_run(**phases: str):
    run = new_run(DEMO, "r1", ["ingest", "l2cache", "meshing"], "auto", None)
    for key, phase in phases.items():
        run.layers[key.replace("_", "-")].phase = phase
    return run


def test_every_layer_is_planned_from_its_spec():
    run = demo_run()
    plan = plan_for(DEMO, run)
    assert set(plan.layers) == set(run.layers)
    assert plan.stall_after_s == DEMO.controller.stall_after_s
    assert plan.billing is not None and plan.billing.region == DEMO.region
    for key, lp in plan.layers.items():
        ls = run.layers[key]
        spec = layer_spec(DEMO, ls.stage, ls.layer)
        assert (lp.completions, lp.cpu, lp.memory_gib) == (
            spec.completions,
            spec.requests.cpu,
            spec.requests.memory_gib,
        )
        assert lp.job_name == spec.job_name("r1") == lp.manifest["metadata"]["name"]
        assert lp.manifest == render_job(DEMO, ls.stage, ls.layer, run_id="r1", parallelism=1)


@pytest.mark.parametrize(
    ("phase", "rendered"),
    [("waiting", True), ("running", True), ("succeeded", False), ("failed", False)],
)
def test_only_layers_that_may_get_a_job_are_rendered(phase, rendered):
    plan = plan_for(DEMO, demo_run(ingest_L2=phase))
    assert (plan.layers["ingest-L2"].manifest is not None) is rendered
    assert plan.layers["ingest-L2"].job_name  # named either way


def test_a_resubmitted_layer_plans_the_job_of_its_attempt():
    run = demo_run()
    run.layers["ingest-L3"].job.attempt = 2
    lp = plan_for(DEMO, run).layers["ingest-L3"]
    assert lp.job_name == layer_spec(DEMO, "ingest", 3).job_name("r1", 2)
    assert lp.manifest["metadata"]["name"] == lp.job_name


def test_a_config_refusal_is_planned_not_raised():
    raw = DEMO.model_dump(mode="json", exclude={"dataset_config"})
    raw["images"].pop("meshing")
    cfg = config_from_dict(raw, DEMO.ds.model_dump(mode="json"))
    plan = plan_for(cfg, demo_run())
    mesh = plan.layers["meshing-L2"]
    assert mesh.manifest is None and "images.meshing" in mesh.refusal
    assert mesh.completions == layer_spec(cfg, "meshing", 2).completions
    assert plan.layers["ingest-L2"].refusal == ""


# Behaviour of `shared.reconcile.build_plan` that the mutation run found unchecked (issue 9): what
# a fresh run stores, per-stage job overrides in the plan, and the plan of a layer the graph does
# not have.


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def with_job(**job_changes) -> object:
    raw = DEMO.model_dump(mode="json", exclude={"dataset_config"})
    raw["job"].update(job_changes)
    return config_from_dict(raw, DEMO.ds.model_dump(mode="json"))


def test_a_new_run_stores_its_settings_and_json_snapshots_of_config_and_dataset() -> None:
    run = new_run(DEMO, "r1", ["ingest"], "auto", T0, budget_usd=5.0)
    assert (run.run_id, run.graph_id, run.stages) == ("r1", DEMO.graph_id, ["ingest"])
    assert run.top_layers == {"ingest": max(ls.layer for ls in run.layers.values())}
    assert (run.advance, run.status, run.created_at, run.budget_usd) == (
        "auto",
        "running",
        T0,
        5.0,
    )
    assert run.config == DEMO.model_dump(mode="json", exclude={"dataset_config"})
    assert "dataset_config" not in run.config
    assert run.dataset == DEMO.ds.model_dump(mode="json")
    # Stored in Firestore: plain JSON values only.
    assert json.loads(json.dumps(run.config)) == run.config
    assert json.loads(json.dumps(run.dataset)) == run.dataset


@pytest.mark.parametrize(
    ("budget_arg", "config_budget", "want"),
    [(None, None, None), (None, 7.0, 7.0), (3.0, 7.0, 3.0)],
)
def test_a_new_runs_budget_is_the_argument_else_the_configs(
    budget_arg, config_budget, want
) -> None:
    raw = DEMO.model_dump(mode="json", exclude={"dataset_config"})
    raw["controller"]["budget_usd"] = config_budget
    cfg = config_from_dict(raw, DEMO.ds.model_dump(mode="json"))
    assert new_run(cfg, "r1", ["ingest"], "auto", T0, budget_usd=budget_arg).budget_usd == want


def test_a_stages_job_override_shapes_its_plan_and_not_the_others() -> None:
    ramp = {"start": 1, "factor": 3.0, "period": 7.0, "max": 9}
    resources = {"cpu": {"base": 1.5}, "memory": {"base": 3.0}}
    cfg = with_job(workloads={"meshing": {"ramp": ramp, "resources": resources}})
    run = new_run(cfg, "r1", ["ingest", "meshing"], "auto", T0)
    plan = plan_for(cfg, run)
    mesh, ingest = plan.layers["meshing-L2"], plan.layers["ingest-L2"]
    assert mesh.ramp == cfg.job.for_stage("meshing").ramp != ingest.ramp
    spec = layer_spec(cfg, "meshing", 2)
    assert (mesh.cpu, mesh.memory_gib) == (spec.requests.cpu, spec.requests.memory_gib)
    assert (mesh.cpu, mesh.memory_gib) != (ingest.cpu, ingest.memory_gib)


def test_a_layer_the_graph_does_not_have_plans_one_batch_named_with_the_reason() -> None:
    ls = LayerState("meshing", 99)
    lp = layer_plan(DEMO, "r1", ls, render=True)
    try:
        render_job(DEMO, "meshing", 99, run_id="r1", parallelism=1, attempt=0)
        want_refusal = ""
    except ManifestError as e:
        want_refusal = str(e)
    assert lp.completions == 1
    assert lp.ramp == DEMO.job.for_stage("meshing").ramp
    assert lp.job_name == job_name(DEMO.graph_id, "meshing", 99, attempt_salt("r1", 0))
    assert lp.refusal == want_refusal and "99" in lp.refusal
    assert lp.manifest is None
