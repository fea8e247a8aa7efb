"""A large run's progress for view tests: many layers in every phase, big counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.forecast.forecast import LayerForecast, RunForecast
from shared.model.state import RunState, build_layers
from shared.views.progress import (
    ClusterTotals,
    LayerPods,
    LayerSize,
    RunProgress,
    layer_progress,
    run_progress,
)

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def big_run(
    top: int = 16, running: int = 7, forecast: bool = False, assumed_chunk_s: float | None = None
) -> tuple[RunState, RunProgress]:
    """ingest L2..top with layers below `running` done, it running, the rest waiting; meshing
    and l2cache waiting on ingest. Chunk counts up to 262144 per layer. With `forecast`, each
    unfinished layer is forecast to take 40 min more than the one before it (the running one:
    40 min) and to cost $75.5 more, the run ends with the last one; `assumed_chunk_s` marks it
    as made before any pod finished."""
    stages = ["ingest", "meshing", "l2cache"]
    tops = {"ingest": top, "meshing": top, "l2cache": 2}
    run = RunState("pinky-20260301-080000-ab12", "pinky_v2", stages, tops, advance="approve",
                   created_at=T0, budget_usd=2500.0, layers=build_layers(stages, tops))  # fmt: skip
    now = T0 + timedelta(hours=30)
    rows = []
    forecasts: list[LayerForecast] = []
    for ls in run.ordered_layers():
        chunks = max(1, 262144 // 8 ** max(0, ls.layer - 2 - 0) if ls.layer < 8 else 1)
        size = LayerSize(chunks, max(1, 128 // 2 ** (ls.layer - 2)))
        pods = None
        if ls.stage == "ingest" and ls.layer < running:
            ls.phase, ls.approval.granted = "succeeded", True
            ls.timing.submitted_at = T0 + timedelta(hours=ls.layer)
            ls.timing.finished_at = ls.timing.submitted_at + timedelta(minutes=50)
            ls.pods.failed, ls.job.completions = 37, size.batches
        elif ls.stage == "ingest" and ls.layer == running:
            ls.phase, ls.approval.granted = "running", True
            ls.timing.submitted_at = now - timedelta(minutes=95)
            ls.job.completions, ls.progress.active, ls.job.parallelism = size.batches, 480, 500
            ls.progress.completed_indexes = f"0-{size.batches // 3}"
            ls.progress.failed_indexes, ls.pods.failed = "17,204", 1234
            pods = LayerPods(ready=471, oom=12, nodes=frozenset({"n1"}), pods=480)
        lf = None
        if forecast and ls.phase != "succeeded":
            lf = LayerForecast(ls.key, 2400.0, 2400.0 * (len(forecasts) + 1), 75.5)
            forecasts.append(lf)
        rows.append(
            layer_progress(
                run, ls, size, now, ramp_target=512, cost_usd=123.456, pods=pods, forecast=lf
            )
        )
    cluster = ClusterTotals(nodes=61, spot_nodes=58, pods=480, cpu_requested=960.0,
                            memory_requested_gib=3840.0)  # fmt: skip
    fc = None
    if forecast:
        end = max(lf.finishes_in_s for lf in forecasts)
        usd = sum(lf.projected_usd for lf in forecasts)
        fc = RunForecast(end, usd, forecasts, assumed_chunk_s)
    return run, run_progress(run, rows, now, cost_usd=1234.5678, cluster=cluster, forecast=fc)
