"""A finished demo-sized run with pod records, for report tests: three ingest layers, a few
hundred attempts with retries, preemptions, an OOM kill and a failed index."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.config.config_files import load_config
from shared.model.state import RunState
from shared.reconcile.build_plan import new_run

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def report_run(seed: int = 3) -> tuple[RunState, dict[str, list[dict[str, Any]]], datetime]:
    cfg = load_config(DEMO)
    run = new_run(cfg, "demo-report", ["ingest"], "auto", T0, budget_usd=5.0)
    rng = random.Random(seed)
    records: dict[str, list[dict[str, Any]]] = {}
    t = T0 + timedelta(seconds=5)
    for ls in run.ordered_layers():
        if ls.layer > 4:
            continue
        n = {2: 16, 3: 4, 4: 1}[ls.layer]
        ls.timing.submitted_at = ls.timing.ramp_started_at = t
        ls.job.completions, ls.phase = n, "succeeded"
        docs = []
        for index in range(n):
            start = t + timedelta(seconds=rng.uniform(0, 20) + 3 * index)
            tries = [("Failed", "DisruptionTarget", 143)] if index == 5 else []
            tries += [("Failed", "OOMKilled", 137)] if index == 7 else []
            tries += [("Failed", "Error", 1)] * (index % 6 == 1)
            tries += [("Succeeded", "Completed", 0)]
            for phase, reason, code in tries:
                end = start + timedelta(seconds=rng.uniform(8, 30))
                docs.append(
                    {"uid": f"{ls.key}-{index}-{len(docs)}", "name": f"j-{index}-{len(docs)}",
                     "index": index, "phase": phase, "cpu": 0.25, "memory_gib": 0.5,
                     "created": start, "started": start, "finished": end, "exit_code": code,
                     "reason": reason, "node": "local"}
                )  # fmt: skip
                start = end + timedelta(seconds=1)
        records[ls.key] = docs
        ls.pods.succeeded = n
        ls.pods.failed = sum(d["phase"] == "Failed" for d in docs)
        ls.pods.cpu_seconds = (
            sum((d["finished"] - d["started"]).total_seconds() for d in docs) * 0.25
        )
        ls.pods.memory_gib_seconds = ls.pods.cpu_seconds * 2
        ls.progress.completed_indexes = f"0-{n - 1}"
        ls.timing.finished_at = max(d["finished"] for d in docs)
        t = ls.timing.finished_at + timedelta(seconds=2)
    top = run.layers["ingest-L5"]
    top.phase, top.timing.submitted_at, top.timing.finished_at = (
        "failed",
        t,
        t + timedelta(seconds=40),
    )
    top.progress.failed_indexes, top.job.completions, top.pods.failed = "0", 1, 3
    records[top.key] = [
        {"uid": f"l5-{i}", "name": f"j5-0-{i}", "index": 0, "phase": "Failed", "cpu": 0.25,
         "memory_gib": 0.5, "created": t, "started": t + timedelta(seconds=13 * i),
         "finished": t + timedelta(seconds=13 * i + 10), "exit_code": 42, "reason": "Error",
         "node": "local"}
        for i in range(3)
    ]  # fmt: skip
    run.status, run.finished_at = "failed", top.timing.finished_at
    return run, records, top.timing.finished_at
