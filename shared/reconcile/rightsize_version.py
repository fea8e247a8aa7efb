"""`job.rightsize: auto` in the run's config history: when a layer's Job is created at
right-sized requests, the reconcile records a config version by `rightsize`, as `pipeline
apply` records its own (shared.operate.config_versions), so `pipeline run` shows who changed the
requests and when (docs/canary-and-rightsize.md). Pure: the version rides on the decision and
its commit record (shared.control.commit_record), written in the reconcile's one commit; it is
added when the decision is finished (shared.reconcile.finish).

The run's stored config is left as it is: the sizes stay a function of the run's state
(shared.reconcile.run_sizes), so the entry records what was applied, not a new source of it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shared.config.config_files import config_from_dict
from shared.jobs.autopilot import layer_requests
from shared.model.state import layer_key
from shared.reconcile.decision import CreateJob, Decision
from shared.reconcile.run_sizes import rightsized

BY = "rightsize"
WHEN = "this layer's Job (job.rightsize: auto), from the layers below it"


def with_rightsize_version(decision: Decision) -> Decision:
    """`decision` with a config version recording the right-sized requests of the layers
    whose Jobs it creates (their state's config version bumped), if any differ from the
    config's; else unchanged."""
    state = decision.state
    started = [
        state.layers[key]
        for a in decision.actions
        if isinstance(a, CreateJob)
        and (key := layer_key(a.stage, a.layer)) in state.layers
        and state.layers[key].job.name == a.job_name
        # started now (a Job re-created after a crash between commit and create is not)
        and state.layers[key].timing.submitted_at == decision.at
    ]
    if not started or not state.config:
        return decision
    cfg = config_from_dict(state.config, state.dataset)
    sized = rightsized(cfg, state)
    changes: list[dict[str, Any]] = []
    for ls in started:
        if (ls.stage, ls.layer) not in sized:
            continue
        configured = layer_requests(cfg.job.for_stage(ls.stage), ls.layer)
        prefix = f"config.job.workloads.{ls.stage}.resources.overrides.{ls.layer}"
        for field_name, old, new in (
            ("cpu", configured.cpu, ls.pods.cpu_request),
            ("memory", configured.memory_gib, ls.pods.memory_request_gib),
        ):
            if old != new:
                changes.append(
                    {"key": f"{prefix}.{field_name}", "old": old, "new": new, "when": WHEN}
                )
    if not changes:
        return decision
    state.config_version += 1
    entry = {
        "version": state.config_version,
        "by": BY,
        "at": decision.at,
        "forced": False,
        "changes": changes,
        "changes_omitted": 0,
    }
    return replace(decision, config_versions=[*decision.config_versions, entry], changed=True)
