"""The predecessor's example pair (examples/predecessor/) renders, at every layer of every
stage, the Jobs the predecessor itself rendered: its own `config.load` (the per-workload deep
merge and its defaults) and `manifest.job_spec` (requests, processes, batch size, retries,
`maxFailedIndexes`, service account, image, command), imported from the published 0.0.4
package. What its `ops.submit` computed inline (completions, the first parallelism and the
ramp's steps) is transcribed below, naming that function."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.config.config_files import load_config
from shared.config.stage_selection import stage_layers
from shared.jobs.autopilot import snap_requests
from shared.jobs.layer_spec import layer_spec
from shared.jobs.manifest import render_job
from shared.model.stages import STAGE_NAMES
from shared.reconcile.decide import ramp_target
from tests.builders.pcg_harness import HarnessUnavailable
from tests.builders.predecessor_pkg import predecessor_module

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "predecessor" / "pipeline.yml"
CFG = load_config(EXAMPLE)


def _as_004(cfg):  # noqa: ANN001, ANN202 - a PipelineConfig
    """`cfg` with what 0.0.4 lacked switched to its behaviour: no packing (it ignored
    `resources.pack`) and one process per whole billed vCPU. What the predecessor's newest
    code changed is tested in tests/unit/jobs/test_node_packing.py and test_worker_pod.py."""
    resources = cfg.job.resources.model_copy(update={"pack": False})
    job = cfg.job.model_copy(update={"resources": resources, "processes_per_vcpu": 1})
    return cfg.model_copy(update={"job": job})


CFG_004 = _as_004(CFG)
CASES = [(stage, layer) for stage in STAGE_NAMES for layer in stage_layers(CFG, stage)]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def pred():
    try:
        return tuple(predecessor_module(m) for m in ("config", "manifest", "costs"))
    except HarnessUnavailable as e:
        pytest.skip(str(e))


def _env(container) -> dict[str, str]:  # noqa: ANN001 - a dict or a V1Container
    if isinstance(container, dict):
        return {e["name"]: e["value"] for e in container["env"]}
    return {e.name: e.value for e in container.env}


def test_every_stage_and_layer_is_covered():
    assert {s for s, _ in CASES} == set(STAGE_NAMES)
    assert [n for s, n in CASES if s == "meshing"] == [2, 3, 4, 5, 6]  # mesh_config.max_layer
    assert [n for s, n in CASES if s == "ingest"] == list(range(2, 9))


@pytest.mark.parametrize(("stage", "layer"), CASES)
def test_the_example_renders_the_predecessors_job(pred, stage, layer):
    """With 0.0.4's packing and process count pinned (_as_004), the Job is 0.0.4's."""
    pred_config, pred_manifest, pred_costs = pred
    pcfg = pred_config.load(str(EXAMPLE), workload=stage)
    chunks = layer_spec(CFG, stage, layer).chunks
    # ops.submit of 0.0.4: completions, the ceiling and the first parallelism.
    batch = pred_manifest.batch_for(pcfg.job, layer)
    completions = math.ceil(chunks / batch)
    pmax = pred_manifest.max_parallelism(pcfg.job.ramp.max, completions)
    first = min(pcfg.job.ramp.start, pmax)
    theirs = pred_manifest.job_spec(pcfg, layer, chunks, completions, first)

    job = CFG.job.for_stage(stage)
    first_ours = ramp_target(job.ramp, completions, None, T0)
    ours = render_job(CFG_004, stage, layer, run_id="r", parallelism=first_ours)
    spec, pspec = ours["spec"], theirs.spec
    assert spec["completions"] == pspec.completions == completions
    assert spec["parallelism"] == pspec.parallelism
    assert spec["maxFailedIndexes"] == pspec.max_failed_indexes
    assert spec["backoffLimitPerIndex"] == pspec.backoff_limit_per_index
    pod, ppod = spec["template"]["spec"], pspec.template.spec
    assert pod["serviceAccountName"] == ppod.service_account_name
    container, pcontainer = pod["containers"][0], ppod.containers[0]
    assert container["image"] == pcontainer.image
    assert container["command"] == pcontainer.command
    # The requests after the merge are the predecessor's (`requests_for`); this project then
    # snaps them to its Autopilot grid (memory in 256 MiB steps: ingest L7's 30.375 GiB asks
    # 30.5 GiB), never below what the predecessor asked.
    cpu, memory = pred_manifest.requests_for(pcfg.job, layer)
    want = snap_requests(cpu, memory, pcfg.job.compute_class)
    got = container["resources"]["requests"]
    assert got == {"cpu": want.cpu_str, "memory": want.memory_str}
    parse_cpu, parse_mem = pred_costs.parse_cpu, pred_costs.parse_mem
    asked = pcontainer.resources.requests
    assert parse_cpu(got["cpu"]) >= parse_cpu(asked["cpu"])
    assert parse_mem(got["memory"]) >= parse_mem(asked["memory"])
    env, penv = _env(container), _env(pcontainer)
    for name in ("PCG_GRAPH_ID", "PCG_LAYER", "PCG_PERM_SEED", "PCG_BATCH_SIZE"):
        assert env[name] == penv[name], name
    assert env["PCG_N_PROCESSES"] == penv["PCG_N_PROCESSES"]
    for name in ("L2CACHE_CV_PATH", "L2CACHE_TABLE_ID"):
        assert env.get(name) == penv.get(name), name
    # ops.submit of 0.0.4: every `period` seconds the parallelism x factor, up to the ceiling.
    ramp, steps, p = pcfg.job.ramp, [first], first
    while p < pmax:
        p = min(p * ramp.factor, pmax)
        steps.append(p)
    at = [T0 + timedelta(seconds=k * ramp.period) for k in range(len(steps) + 1)]
    assert [ramp_target(job.ramp, completions, T0, t) for t in at] == [*steps, pmax]
