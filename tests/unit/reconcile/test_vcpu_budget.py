"""`controller.max_vcpus` in the reconcile decision: running layers' parallelism is limited so
that pods x vCPU over the project's running layers stays under the cap (the other runs' share
comes in the snapshot), new layers start only when a pod fits, and no running layer loses
its last pod."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.config.config import Ramp
from shared.model.state import RunState, build_layers
from shared.reconcile.decide import decide
from shared.reconcile.decision import CreateJob, LayerPlan, PatchJob, Plan, Snapshot
from shared.reconcile.vcpu_budget import running_vcpus
from tests.builders.decide_runs import T0, job, name_for

RAMP = Ramp(start=2, factor=2, period=60, max=64)


def two_stage_run(mesh_running: int, cache_running: int | None) -> RunState:
    """meshing L2 running at `mesh_running` pods of 4 vCPU; l2cache L2 running at
    `cache_running` pods of 1 vCPU (None: waiting, its dependencies met)."""
    stages = ["ingest", "meshing", "l2cache"]
    tops = {"ingest": 2, "meshing": 2, "l2cache": 2}
    run = RunState("r1", "g", stages, tops, advance="auto", layers=build_layers(stages, tops))
    run.layers["ingest-L2"].phase = "succeeded"
    run.layers["ingest-L2"].timing.finished_at = T0
    for key, pods, cpu in (("meshing-L2", mesh_running, 4.0), ("l2cache-L2", cache_running, 1.0)):
        if pods is None:
            continue
        ls = run.layers[key]
        ls.phase, ls.job.name, ls.job.parallelism, ls.pods.cpu_request = (
            "running",
            name_for(ls),
            pods,
            cpu,
        )
        ls.job.completions, ls.timing.ramp_started_at, ls.progress.at = 100, T0, T0
    return run


def plan(run: RunState, max_vcpus: float | None) -> Plan:
    cpu = {"ingest": 1.0, "meshing": 4.0, "l2cache": 1.0}
    layers = {
        k: LayerPlan(100, RAMP, cpu[ls.stage], 2.0, job_name=name_for(ls))
        for k, ls in run.layers.items()
    }
    return Plan(layers, max_vcpus=max_vcpus)


def decide_at(run: RunState, max_vcpus: float | None, others: float, minutes: float = 10):
    jobs = {
        ls.job.name: job(ls.job.name, completions=100, parallelism=ls.job.parallelism)
        for ls in run.layers.values()
        if ls.phase == "running"
    }
    seen = Snapshot(run, jobs, {}, others)
    return decide(seen, plan(run, max_vcpus), None, T0 + timedelta(minutes=minutes))


def parallelism(d, key: str) -> int | None:
    ls = d.state.layers[key]
    return ls.job.parallelism if ls.phase == "running" else None


@pytest.mark.parametrize(
    ("max_vcpus", "others", "mesh", "cache", "want_mesh", "want_cache"),
    [
        # No cap: both ramp to the ramp's max (64).
        (None, 0.0, 4, 8, 64, 64),
        # 100 vCPU: meshing (first in build order) ramps to 25 pods x 4; l2cache keeps 1.
        (100.0, 0.0, 4, 8, 23, 8),
        # Another run holds 60: 40 left; meshing holds 16, l2cache 8, room 16 more -> mesh 8.
        (100.0, 60.0, 4, 8, 8, 8),
        # Over the cap (lowered): meshing has room for none of its 4-vCPU pods and keeps
        # one; l2cache gets the 6 vCPU left: 4 + 6 = 10.
        (10.0, 0.0, 4, 8, 1, 6),
        # Below one pod each: every running layer keeps one (the documented overshoot).
        (2.0, 0.0, 4, 8, 1, 1),
        # Fractional room: 4.5 vCPU left over for meshing -> 1 more pod, not 1.125.
        (20.5, 0.0, 2, 8, 3, 8),
    ],
)
def test_running_layers_share_the_cap(max_vcpus, others, mesh, cache, want_mesh, want_cache):
    d = decide_at(two_stage_run(mesh, cache), max_vcpus, others)
    assert (parallelism(d, "meshing-L2"), parallelism(d, "l2cache-L2")) == (want_mesh, want_cache)
    if max_vcpus is not None and (want_mesh, want_cache) != (1, 1):
        assert others + 4 * want_mesh + want_cache <= max_vcpus
    patches = {a.job_name: a.parallelism for a in d.actions if isinstance(a, PatchJob)}
    assert patches.get("job-meshing-2-0", mesh) == want_mesh


@pytest.mark.parametrize(
    ("max_vcpus", "others", "starts", "want"),
    [
        (None, 0.0, True, 2),  # the ramp's start
        (100.0, 0.0, True, 2),
        (100.0, 99.0 - 16, True, 1),  # 3 vCPU left: one 1-vCPU pod of the two it would start
        (100.0, 100.0 - 16, False, None),  # nothing left: it waits, no Job
    ],
)
def test_a_new_layer_starts_only_when_a_pod_fits(max_vcpus, others, starts, want):
    # meshing holds 4 pods x 4 vCPU = 16; l2cache L2 is eligible.
    d = decide_at(two_stage_run(4, None), max_vcpus, others, minutes=0)
    creates = [a for a in d.actions if isinstance(a, CreateJob) and a.stage == "l2cache"]
    assert bool(creates) == starts
    assert parallelism(d, "l2cache-L2") == want
    assert d.state.layers["l2cache-L2"].timing.held_by_vcpu_cap == (not starts)  # status says why
    if creates:
        assert creates[0].parallelism == want


def test_running_vcpus_counts_running_layers_of_running_runs_only():
    run = two_stage_run(4, 8)
    assert running_vcpus([run]) == 4 * 4 + 8 * 1
    run.status = "paused"  # its Jobs are suspended: no pods
    assert running_vcpus([run]) == 0
