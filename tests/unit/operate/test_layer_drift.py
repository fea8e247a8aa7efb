"""`pipeline apply`'s drift of a running layer (shared/operate/layer_drift.py): which changes
replace its Job at once and which are scheduling only, the replacement as a new attempt in
the same commit (shared/operate/config_versions.py), and the decide/act path carrying it out
(the running Job deleted, the new attempt's Job created once its pods are gone)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from shared.config.config import JobOverride
from shared.config.config_files import load_config
from shared.operate.config_versions import REPLACES_RUNNING, apply_config, diff
from shared.operate.layer_drift import DriftAction, describe, layer_drift
from shared.operate.operator_actions import ActionError, replace_running
from shared.ports.cluster import PodInfo
from shared.reconcile.build_plan import new_run
from shared.reconcile.decide import decide
from shared.reconcile.decision import CreateJob, DeleteJob, Snapshot
from tests.builders.decide_runs import T0, job, make_run, name_for, plans
from tests.builders.stored_runs import NOW

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
CFG = load_config(DEMO)


def edited(job=None, **top):
    return CFG.model_copy(update={"job": CFG.job.model_copy(update=job or {}), **top})


RAMP8 = CFG.job.ramp.model_copy(update={"max": 8})
MEMORY = CFG.job.resources.model_copy(
    update={"memory": CFG.job.resources.memory.model_copy(update={"base": 2.0})}
)
REPLACE, NOTE, NONE = DriftAction.REPLACE, DriftAction.NOTE, DriftAction.NONE


@pytest.mark.parametrize(
    ("new", "stage", "action", "work", "scheduling"),
    [
        (CFG, "ingest", NONE, [], []),
        (edited(images={**CFG.images, "ingest": "img:2"}), "ingest", REPLACE, ["image"], []),
        (edited(images={**CFG.images, "meshing": "img:2"}), "ingest", NONE, [], []),  # not its
        (edited({"perm_seed": 7}), "ingest", REPLACE, ["perm_seed"], []),
        (edited({"batch_size": 7}), "ingest", REPLACE, ["batch_size"], []),
        (edited({"workloads": {"ingest": JobOverride(batch_size=7)}}), "ingest", REPLACE,
         ["batch_size"], []),
        (edited({"workloads": {"ingest": JobOverride(batch_size=7)}}), "l2cache", NONE, [], []),
        (edited(env={"FOO": "1"}), "ingest", REPLACE, ["env:FOO"], []),  # added
        (edited({"processes_per_vcpu": 3}), "ingest", NOTE, [], ["processes_per_vcpu"]),
        (edited({"parallel": False}), "ingest", NOTE, [], ["parallel"]),
        (edited({"compute_class": "Scale-Out"}), "ingest", NOTE, [], ["compute_class"]),
        (edited({"spot": False}), "ingest", NOTE, [], ["spot"]),
        (edited({"task_retries": 9}), "ingest", NOTE, [], ["task_retries"]),
        (edited({"max_failed_tasks": 1}), "ingest", NOTE, [], ["max_failed_tasks"]),
        (edited({"ramp": RAMP8}), "ingest", NOTE, [], ["ramp"]),
        # resources: the next attempt (or the in-place resize), as the diff says; no drift
        (edited({"resources": MEMORY}), "ingest", NONE, [], []),
        (edited({"ramp": RAMP8, "perm_seed": 7}, images={**CFG.images, "ingest": "img:2"}),
         "ingest", REPLACE, ["image", "perm_seed"], ["ramp"]),
    ],
)  # fmt: skip
def test_a_running_layers_drift_is_work_or_scheduling(new, stage, action, work, scheduling):
    drift = layer_drift(CFG, new, f"{stage}-L2", stage)
    assert drift.action is action
    assert [f.field for f in drift.work] == work
    assert [f.field for f in drift.scheduling] == scheduling


@pytest.mark.parametrize(
    ("old_env", "new_env", "running", "desired"),
    [({}, {"A": "1"}, None, "1"), ({"A": "1"}, {"A": "2"}, "1", "2"), ({"A": "1"}, {}, "1", None)],
)
def test_an_env_value_added_changed_or_removed_replaces_the_job(old_env, new_env, running, desired):
    drift = layer_drift(edited(env=old_env), edited(env=new_env), "ingest-L2", "ingest")
    assert drift.action is REPLACE
    assert [(f.field, f.running, f.desired) for f in drift.work] == [("env:A", running, desired)]


def test_an_image_or_env_change_says_a_running_layer_is_replaced():
    new = edited(images={**CFG.images, "ingest": "img:2"}, env={"A": "1"})
    assert {c.key: c.when for c in diff(CFG, new)} == {
        "config.images.ingest": REPLACES_RUNNING,
        "config.env.A": REPLACES_RUNNING,
    }


def _running(run, key: str, name: str) -> None:
    ls = run.layers[key]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", name, 10, 4
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = NOW
    ls.pods.cpu_seconds, ls.pods.running_cpu_seconds = 10.0, 5.0


def test_apply_replaces_a_running_layer_whose_image_changed_in_the_same_commit():
    run = new_run(CFG, "r1", ["ingest"], "auto", NOW)
    _running(run, "ingest-L2", "old-job")
    new = edited(images={**CFG.images, "ingest": "img:2"})
    entry = apply_config(run, new, diff(CFG, new), False, "bob", NOW)
    ls = run.layers["ingest-L2"]
    assert (ls.phase, ls.job.attempt, ls.job.name) == ("waiting", 1, "")
    assert (ls.job.retire_job, ls.job.retire_delete) == ("old-job", True)
    assert ls.approval.granted and ls.approval.by == "bob"
    assert ls.pods.cpu_seconds == 15.0  # what the replaced attempt cost is kept
    (layer,) = entry["running_layers"]
    assert (layer["layer"], layer["action"], layer["job"]) == ("ingest-L2", "replace", "old-job")
    assert layer["work"] == ["image 'cave-pipeline/worker:local' -> 'img:2'"]
    assert "replaced at once" in layer["line"] and "skip the chunks already done" in layer["line"]
    assert run.config["images"]["ingest"] == "img:2"


def test_apply_notes_scheduling_only_drift_and_leaves_the_running_job():
    run = new_run(CFG, "r1", ["ingest"], "auto", NOW)
    _running(run, "ingest-L2", "old-job")
    new = edited({"processes_per_vcpu": 3, "ramp": RAMP8})
    entry = apply_config(run, new, diff(CFG, new), False, "bob", NOW)
    ls = run.layers["ingest-L2"]
    assert (ls.phase, ls.job.attempt, ls.job.name, ls.job.retire_job) == (
        "running",
        0,
        "old-job",
        "",
    )
    (layer,) = entry["running_layers"]
    assert layer["action"] == "note"
    assert layer["scheduling"] == ["processes_per_vcpu 1 -> 3", "ramp " + repr_ramp(RAMP8)]
    assert "scheduling only, not replaced" in layer["line"]


def repr_ramp(new) -> str:
    return f"{CFG.job.ramp.model_dump()!r} -> {new.model_dump()!r}"


def test_a_forced_seed_change_replaces_the_running_layer_and_waiting_ones_take_it_later():
    run = new_run(CFG, "r1", ["ingest"], "auto", NOW)
    _running(run, "ingest-L2", "old-job")
    new = edited({"perm_seed": 7})
    entry = apply_config(run, new, diff(CFG, new), True, "bob", NOW)
    assert [(x["layer"], x["action"]) for x in entry["running_layers"]] == [
        ("ingest-L2", "replace")
    ]
    assert run.layers["ingest-L3"].job.attempt == 0  # waiting: its Job is created with it


def test_only_a_running_layer_is_replaced():
    run = make_run()
    with pytest.raises(ActionError, match="only a running layer"):
        replace_running(run, "ingest", 2, "bob", T0)


def test_the_controller_deletes_the_replaced_job_then_creates_the_new_attempt():
    run = make_run()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", name_for(ls), 10, 4
    ls.timing.ramp_started_at = ls.progress.at = T0
    old = ls.job.name
    replace_running(run, "ingest", 2, "bob", T0)
    plan = plans(run)
    pod = PodInfo("p0", "u0", old, 0, "Running", 1.0, 1.0, created=T0, started=T0)
    # The running Job is still there: deleted (again, while listed), nothing created.
    first = decide(Snapshot(run, {old: job(old)}, {old: [pod]}), plan, None, T0)
    assert [a for a in first.actions if isinstance(a, (DeleteJob, CreateJob))] == [DeleteJob(old)]
    # Gone, its pod still stopping: the new attempt waits, never overlapping it.
    run = first.state
    second = decide(Snapshot(run, {old: None}, {old: [pod]}), plan, None, T0)
    assert not [a for a in second.actions if isinstance(a, (DeleteJob, CreateJob))]
    # Its pods gone: the new attempt's Job is created.
    run = second.state
    later = T0 + timedelta(seconds=5)
    third = decide(Snapshot(run, {old: None}, {old: []}), plan, None, later)
    (create,) = [a for a in third.actions if isinstance(a, CreateJob)]
    assert create.job_name == "job-ingest-2-1" != old
    assert third.state.layers["ingest-L2"].phase == "running"
    assert describe(layer_drift(CFG, CFG, "ingest-L2", "ingest"), old).endswith("unchanged")
