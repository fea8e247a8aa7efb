"""Out-of-memory kills: the alert a layer sends once, and the memory its next attempt asks.

A pod is ended by the OOM killer at one of two scopes: its container's (reason `OOMKilled`)
or its node's (the node's `OOMKilling` event, shared.reconcile.node_oom), and both count. Its
Job retries the index with the same pod template, so more memory needs a new attempt (a
re-created Job: `pipeline submit`, or `pipeline apply` of new resources). With
`job.oom_memory_factor` set, an attempt that saw OOM kills hands its successor that factor
more memory (compounded per such attempt), snapped to Autopilot by `shared.jobs.autopilot` as any
request. Pure module.
"""

from __future__ import annotations

from typing import Any

from shared.config.config import JobOverride, LayerOverride, PipelineConfig
from shared.jobs.autopilot import ResourceLimitError, layer_requests
from shared.model.state import LayerState, RunState
from shared.reconcile.evictions import evicted_repeatedly
from shared.reconcile.oom_advice import oom_advice


def oom_alert_details(
    ls: LayerState,
    processes: int = 1,
    processes_per_vcpu: int = 1,
    peak_memory_gib: float | None = None,
) -> dict[str, Any] | None:
    """The details of the layer's one `oom_killed` alert, when it has OOM kills and has not
    alerted yet (marks it alerted): kills by scope (the container's limit, the node's OOM
    killer) and the advice for a pod of `processes` processes (`processes_per_vcpu`
    configured). `peak_memory_gib`: the highest usage seen, if measured."""
    if not ls.faults.oom_killed or ls.faults.oom_alerted:
        return None
    ls.faults.oom_alerted = True
    advice = oom_advice(processes, processes_per_vcpu, ls.pods.memory_request_gib)
    node = ls.faults.node_oom_killed
    details = {
        "pods": ls.faults.oom_killed,
        "container_oom_kills": ls.faults.oom_killed - node,
        "node_oom_kills": node,
        "memory_request_gib": ls.pods.memory_request_gib,
        "peak_memory_gib": peak_memory_gib,
        "processes": processes,
        "processes_per_vcpu": processes_per_vcpu,
        "levers": [lever.value for lever in advice.levers],
        "fix": advice.fix,
    }
    return details


def next_memory_factor(ls: LayerState, factor: float | None) -> float:
    """The memory factor of the layer's next attempt: raised by `factor` if this attempt
    saw OOM kills or an index evicted `job.max_evictions_per_index` times for node pressure
    (shared.reconcile.evictions), and the factor is on; else unchanged."""
    if factor and (ls.faults.oom_killed or evicted_repeatedly(ls)):
        return ls.faults.memory_factor * factor
    return ls.faults.memory_factor


def with_memory_factors(cfg: PipelineConfig, run: RunState) -> PipelineConfig:
    """`cfg` with a per-layer memory override for every layer of `run` whose attempt asks
    for more memory (`memory_factor` > 1): its configured (snapped) memory times the
    factor. The overrides go through the same snapping and ceilings as any request."""
    raised = [ls for ls in run.layers.values() if ls.faults.memory_factor > 1.0]
    if not raised:
        return cfg
    workloads = dict(cfg.job.workloads)
    for stage in sorted({ls.stage for ls in raised}):
        job = cfg.job.for_stage(stage)
        overrides = dict(job.resources.overrides)
        for ls in (ls for ls in raised if ls.stage == stage):
            try:
                base = layer_requests(job, ls.layer).memory_gib
            except ResourceLimitError:
                continue  # the layer is refused anyway; the plan says why
            old = overrides.get(ls.layer) or LayerOverride()
            overrides[ls.layer] = old.model_copy(update={"memory": base * ls.faults.memory_factor})
        resources = job.resources.model_copy(update={"overrides": overrides})
        current = workloads.get(stage)
        workloads[stage] = (current or JobOverride()).model_copy(update={"resources": resources})
    job_cfg = cfg.job.model_copy(update={"workloads": workloads})
    return cfg.model_copy(update={"job": job_cfg})
