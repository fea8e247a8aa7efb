"""In-place resize of a running layer's pods (shared.reconcile.resize): which pods are asked
to take the plan's requests, once each per target, and through `decide` only while the run
runs (docs/cli.md#steering-a-build)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.model.state import LayerState
from shared.reconcile.decide import decide
from shared.reconcile.decision import LayerPlan, Plan, ResizePod, Snapshot
from shared.reconcile.resize import resize_step
from tests.builders.decide_runs import RAMP, T0, job, make_run, name_for
from tests.builders.pod_infos import pod_info

NEW = {"requests": {"cpu": "2", "memory": "4Gi"}}


def manifest(resources=NEW):
    containers = [{"name": "worker", "resources": resources}, {"name": "side", "resources": {}}]
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def layer(created=(1.0, 2.0), target=(0.0, 0.0), asked=()) -> LayerState:
    ls = LayerState("ingest", 2, phase="running")
    ls.job.name = "j"
    ls.pods.cpu_request, ls.pods.memory_request_gib = created
    ls.job.resize_cpu, ls.job.resize_memory_gib = target
    ls.job.resize_asked = list(asked)
    return ls


def plan(cpu=2.0, memory=4.0, resources=NEW) -> LayerPlan:
    return LayerPlan(
        10, RAMP, cpu=cpu, memory_gib=memory, job_name="j", manifest=manifest(resources)
    )


A, B = pod_info("a"), pod_info("b")  # Running at 1 vCPU / 2 GiB


@pytest.mark.parametrize(
    ("ls", "lp", "pods", "asked_now", "asked_after"),
    [
        # the config's requests are the Job's: nothing to do, and a stale target is cleared
        (layer(target=(2.0, 4.0), asked=["p-a"]), plan(1.0, 2.0), [A], [], []),
        # new requests: every Running pod still at the old ones is asked
        (layer(), plan(), [A, B], ["p-a", "p-b"], ["p-a", "p-b"]),
        # only memory changed: still a resize
        (layer(), plan(1.0, 3.0), [A], ["p-a"], ["p-a"]),
        # asked before for this target: not again (a refused resize is not retried)
        (layer(target=(2.0, 4.0), asked=["p-a"]), plan(), [A, B], ["p-b"], ["p-a", "p-b"]),
        # a new target: asked again, the old list dropped
        (layer(target=(3.0, 6.0), asked=["p-a"]), plan(), [A], ["p-a"], ["p-a"]),
        # a pod at the new requests already (resized, or created so): not asked
        (layer(), plan(), [pod_info("a", cpu_request=2.0, memory_request_gib=4.0)], [], []),
        # Pending and finished pods are not resized; the asked list keeps Running pods only
        (layer(target=(2.0, 4.0), asked=["p-gone", "p-a"]), plan(),
         [pod_info("p", phase="Pending"), pod_info("f", phase="Succeeded"), A], [], ["p-a"]),
        # a layer stored before its creation requests were kept: not known, nothing done
        (layer(created=(0.0, 0.0)), plan(), [A], [], []),
        # no Job renders for the plan: nothing to resize to
        (layer(), LayerPlan(10, RAMP, cpu=2.0, memory_gib=4.0, job_name="j"), [A], [], []),
    ],
)  # fmt: skip
def test_which_pods_are_asked(ls, lp, pods, asked_now, asked_after):
    out = []
    resize_step(ls, lp, pods, out)
    assert [a.pod_name for a in out] == asked_now
    assert all(a == ResizePod("j", a.pod_name, "worker", NEW) for a in out)
    assert all(a.resources == NEW for a in out)  # the worker container's block, not another's
    assert ls.job.resize_asked == asked_after


def _decided(status: str):
    run = make_run()
    run.status = status
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.progress.at = "running", name_for(ls), T0
    ls.pods.cpu_request, ls.pods.memory_request_gib = 1.0, 2.0  # what the Job was created with
    name = ls.job.name
    layers = {k: LayerPlan(10, RAMP, job_name=name_for(x)) for k, x in run.layers.items()}
    layers["ingest-L2"] = LayerPlan(
        10, RAMP, cpu=2.0, memory_gib=4.0, job_name=name, manifest=manifest()
    )
    pods = [pod_info("a", job_name=name)]
    seen = Snapshot(run, {name: job(name)}, {name: pods})
    return decide(seen, Plan(layers), None, T0 + timedelta(seconds=10)), seen, name


def test_decide_resizes_a_running_layers_pods_once_and_records_it():
    d, seen, name = _decided("running")
    assert [a for a in d.actions if isinstance(a, ResizePod)] == [
        ResizePod(name, "p-a", "worker", NEW)
    ]
    assert d.changed and d.state.layers["ingest-L2"].job.resize_asked == ["p-a"]
    # the next reconcile sees the pod still at its old requests (refused): not asked again
    later = T0 + timedelta(seconds=20)
    again = decide(Snapshot(d.state, seen.jobs, seen.pods), Plan(_plan_of(d)), None, later)
    assert not [a for a in again.actions if isinstance(a, ResizePod)]


def _plan_of(d):
    run = d.state
    layers = {k: LayerPlan(10, RAMP, job_name=name_for(x)) for k, x in run.layers.items()}
    ls = run.layers["ingest-L2"]
    layers["ingest-L2"] = LayerPlan(
        10, RAMP, cpu=2.0, memory_gib=4.0, job_name=ls.job.name, manifest=manifest()
    )
    return layers


def test_a_paused_run_resizes_nothing():
    d, _, _ = _decided("paused")
    assert not [a for a in d.actions if isinstance(a, ResizePod)]
