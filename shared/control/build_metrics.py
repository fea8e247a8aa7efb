"""What the controller logs of a build after each committed reconcile, for Cloud Monitoring's
log-based metrics and the build dashboard (terraform/dashboard.tf, terraform/dashboard.json):
one `run progress` entry per run (status, spend against budget) and one `layer progress`
entry per running layer (chunks done of its total, parallelism against the ramp's target,
pods running, retries) - the figures `pipeline status` shows, from the same functions.
Pure module.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from shared.config.config import PipelineConfig
from shared.model.grid import layer_batch_size
from shared.model.layer_size import LayerSize, chunks_done
from shared.model.layers import layer_shape
from shared.model.phase import Phase
from shared.model.state import RunState, layer_key
from shared.money.costs import run_cost
from shared.money.pricing import RateRow
from shared.reconcile.decision import Plan
from shared.reconcile.parallelism import parallelism_target

RUN_PROGRESS = "run progress"  # jsonPayload.message of the run's entry
LAYER_PROGRESS = "layer progress"  # ... of a running layer's


def progress_entries(
    cfg: PipelineConfig, run: RunState, plan: Plan, rates: tuple[RateRow, ...], now: datetime
) -> list[dict[str, Any]]:
    """The run's entry, then one per running layer, as `log_json` fields (message first)."""
    spend = (
        round(run_cost(run, rates, plan.billing, now).usd, 4) if plan.billing and rates else None
    )
    entries: list[dict[str, Any]] = [
        {
            "message": RUN_PROGRESS,
            "run": run.run_id,
            "status": run.status,
            "spend_usd": spend,
            "budget_usd": run.budget_usd,
            "layers_running": sum(ls.phase == Phase.RUNNING for ls in run.layers.values()),
        }
    ]
    for ls in run.ordered_layers():
        if ls.phase != Phase.RUNNING:
            continue
        size = LayerSize(
            math.prod(layer_shape(cfg.layer2_shape(), ls.layer)),
            layer_batch_size(cfg.job.for_stage(ls.stage).batch_size, ls.layer),
        )
        lp = plan.layers.get(layer_key(ls.stage, ls.layer))
        target = (
            parallelism_target(
                lp.ramp,
                ls.job.completions or lp.completions,
                ls.timing.ramp_started_at,
                now,
                override=ls.job.scale_override,
                current=ls.job.parallelism,
            )
            if lp is not None and (ls.job.completions or lp.completions)
            else 0
        )
        entries.append(
            {
                "message": LAYER_PROGRESS,
                "run": run.run_id,
                "stage": ls.stage,
                "layer": ls.layer,
                "chunks_done": chunks_done(ls.progress.completed_indexes, size),
                "chunks_total": size.chunks,
                "parallelism": ls.job.parallelism,
                "ramp_target": target,
                "pods_running": ls.progress.active,
                "retries": ls.pods.failed,
            }
        )
    return entries
