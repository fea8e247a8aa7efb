"""`pipeline apply` (shared/operate/config_versions.py): the diff as dotted keys, when each change
takes effect, the refusal of changes that invalidate finished work, the recorded version;
and the reconcile acting on a changed ramp at once."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from shared.config.config_files import load_config
from shared.operate.config_versions import (
    AT_ONCE,
    IN_PLACE,
    NEXT_ATTEMPT,
    NO_EFFECT,
    REFUSED,
    REPLACES_RUNNING,
    ProtectedChangeError,
    apply_config,
    diff,
)
from shared.operate.operator_actions import ActionError
from shared.reconcile.build_plan import new_run
from shared.reconcile.decide import decide
from shared.reconcile.decision import LayerPlan, PatchJob, Snapshot
from tests.builders.decide_runs import RAMP, T0, job, make_run, name_for, plans
from tests.builders.stored_runs import NOW

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
CFG = load_config(DEMO)


def edited(job_changes=None, dataset_changes=None, **top):
    job = CFG.job.model_copy(update=job_changes or {})
    ds = CFG.ds
    if dataset_changes:
        ds = ds.model_copy(update=dataset_changes)
    return CFG.model_copy(update={"job": job, "dataset_config": ds, **top})


@pytest.mark.parametrize(
    ("new", "key", "when"),
    [
        (edited({"ramp": CFG.job.ramp.model_copy(update={"max": 8})}),
         "config.job.ramp.max", AT_ONCE),
        (edited(controller=CFG.controller.model_copy(update={"stall_after_s": 9.0})),
         "config.controller.stall_after_s", AT_ONCE),
        (edited({"task_retries": 5}), "config.job.task_retries", NEXT_ATTEMPT),
        (edited(images={**CFG.images, "ingest": "img:2"}), "config.images.ingest",
         REPLACES_RUNNING),
        (edited({"resources": CFG.job.resources.model_copy(
            update={"memory": CFG.job.resources.memory.model_copy(update={"base": 2.0})})}),
         "config.job.resources.memory.base", IN_PLACE),
        (edited({"perm_seed": 7}), "config.job.perm_seed", REFUSED),
        (edited({"batch_size": 7}), "config.job.batch_size", REFUSED),
        (edited(graph_id="other"), "config.graph_id", REFUSED),
        (edited(dataset_changes={"graph_config": CFG.ds.graph_config.model_copy(
            update={"CHUNK_SIZE": (8, 8, 8)})}), "dataset.graph_config.CHUNK_SIZE", REFUSED),
        (edited(start_layers={"ingest": 3}), "config.start_layers.ingest", NO_EFFECT),
    ],
)  # fmt: skip
def test_each_change_says_when_it_takes_effect(new, key, when):
    (change,) = diff(CFG, new)
    assert (change.key, change.when) == (key, when)


def test_the_same_config_from_another_file_is_no_change():
    assert diff(CFG, CFG.model_copy(update={"source_path": "/elsewhere.yml"})) == []


def test_a_seed_change_is_refused_unless_forced_and_the_version_records_the_diff():
    run = new_run(CFG, "r1", ["ingest"], "auto", NOW)
    new = edited({"perm_seed": 7, "ramp": CFG.job.ramp.model_copy(update={"max": 8})})
    changes = diff(CFG, new)
    with pytest.raises(ProtectedChangeError, match=r"config.job.perm_seed 42 -> 7.*--force"):
        apply_config(run, new, changes, False, "bob", NOW)
    assert run.config_version == 1 and run.config["job"]["perm_seed"] == 42
    entry = apply_config(run, new, changes, True, "bob", NOW)
    assert (entry["version"], entry["by"], entry["at"], entry["forced"]) == (2, "bob", NOW, True)
    assert {c["key"]: (c["old"], c["new"]) for c in entry["changes"]} == {
        "config.job.perm_seed": (42, 7),
        "config.job.ramp.max": (4, 8),
    }
    assert run.config_version == 2 and run.config["job"]["perm_seed"] == 7


def test_a_ramp_change_alone_applies_without_force_and_a_finished_run_refuses():
    run = new_run(CFG, "r1", ["ingest"], "auto", NOW)
    new = edited({"ramp": CFG.job.ramp.model_copy(update={"max": 8})})
    entry = apply_config(run, new, diff(CFG, new), False, "bob", NOW)
    assert entry["forced"] is False and run.config["job"]["ramp"]["max"] == 8
    run.status = "succeeded"
    with pytest.raises(ActionError, match="nothing left to apply"):
        apply_config(run, new, diff(CFG, new), False, "bob", NOW)


@pytest.mark.parametrize(("ramp_max", "want"), [(16, 16), (4, 4), (1, 1)])
def test_a_running_layer_follows_a_changed_ramp_max_up_and_down(ramp_max, want):
    run = make_run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", name_for(ls), 100, 8
    ls.timing.ramp_started_at = ls.progress.at = T0
    plan = plans(run, completions=100)
    ramp = RAMP.model_copy(update={"max": ramp_max})
    plan.layers["ingest-L2"] = LayerPlan(100, ramp, job_name=ls.job.name)
    jobs = {ls.job.name: job(ls.job.name, completions=100, parallelism=8)}
    d = decide(Snapshot(run, jobs), plan, None, T0 + timedelta(minutes=10))
    assert d.state.layers["ingest-L2"].job.parallelism == want
    patches = [a for a in d.actions if isinstance(a, PatchJob)]
    assert [p.parallelism for p in patches] == ([] if want == 8 else [want])
