"""The plan a reconcile decides by: per layer, the spec's numbers and the Job of the current
attempt, rendered only where a Job may be created, refusals captured instead of raised."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config.config_files import config_from_dict, load_config
from shared.jobs.layer_spec import layer_spec
from shared.jobs.manifest import render_job
from shared.reconcile.build_plan import new_run, plan_for

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
    run.layers["ingest-L3"].attempt = 2
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
