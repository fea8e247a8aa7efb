"""The forecast (shared.forecast.forecast) replayed over finished demo runs, from their pod records.

A demo run with `--workdir DIR` keeps its cluster's Jobs and pods (created, started,
finished) in DIR/stack/cluster.json. For each run this rebuilds the run's layer state as the
controller would have stored it at 20, 30, 40, 50, 60 and 75 % of its wall time (completed
indexes, pods succeeded and their runtimes, pods under way, submissions and finishes) and
prints the forecast's error there, (predicted - actual) / actual. WALL_S is the demo's
`wall_s`; without it, the span from the first Job's creation to the last one's completion.

    pipeline demo --size 256 --json --workdir /tmp/d256   # note its wall_s
    python bench/bench_forecast.py /tmp/d256:482.25 /tmp/d128:118.77

The last line is JSON: {DIR: {share: error}}.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from scripts.demo_run import prepare_config
from shared.config.config import PipelineConfig
from shared.config.config_files import load_config
from shared.forecast.forecast import run_forecast
from shared.model import intervals
from shared.model.phase import Phase
from shared.model.state import RunState, layer_key
from shared.reconcile.build_plan import new_run

ROOT = Path(__file__).resolve().parents[1]
SHARES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.75)


def _at(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text and text != "None" else None


def load_jobs(workdir: Path) -> dict[int, dict[str, Any]]:
    """The run's Jobs (status and pods), by layer."""
    path = workdir / "stack" / "cluster.json"
    if not path.exists():
        raise FileNotFoundError(f"no {path}: a demo's --workdir?")
    jobs = {}
    for job in json.loads(path.read_text())["jobs"]:
        layer = int(job["status"]["labels"].get("cave-pipeline/layer", 0))
        labels = job["status"]["labels"]
        if (
            labels.get("cave-pipeline/stage") == "ingest"
            and layer >= 2
            and "cave-pipeline/step" not in labels
        ):
            jobs[layer] = job
    return jobs


def state_at(cfg: PipelineConfig, jobs: dict[int, dict[str, Any]], t0: datetime, t: datetime):
    """The ingest run's layers as stored at `t` (what the pods had done by then)."""
    run: RunState = new_run(cfg, "replay", ["ingest"], "auto", t0)
    for layer, job in jobs.items():
        ls, status = run.layers[layer_key("ingest", layer)], job["status"]
        created = _at(status["created"])
        assert created is not None
        if created > t:
            continue
        ls.phase, ls.timing.submitted_at, ls.timing.ramp_started_at = (
            Phase.RUNNING,
            created,
            created,
        )
        ls.timing.eligible_at, ls.job.completions = created, status["completions"]
        pods = job["pods"]
        done = [p for p in pods if p["phase"] == "Succeeded" and _at(p["finished"]) <= t]
        ls.progress.completed_indexes = intervals.format(p["index"] for p in done)
        ls.pods.succeeded = len(done)
        ls.pods.succeeded_runtime_s = sum(
            (_at(p["finished"]) - _at(p["started"])).total_seconds() for p in done
        )
        ls.progress.active = sum(
            1
            for p in pods
            if p["started"]
            and _at(p["started"]) <= t
            and not (p["finished"] and _at(p["finished"]) <= t)
        )
        finished = _at(status.get("completion_time"))
        if finished is not None and finished <= t:
            ls.phase, ls.timing.finished_at = Phase.SUCCEEDED, finished
    return run


def replay(workdir: Path, wall_s: float | None) -> dict[str, float]:
    """The forecast's error at each share of the run's wall time."""
    size = int(np.load(workdir / "volume.npy", mmap_mode="r").shape[0])
    cfg = prepare_config(load_config(ROOT / "examples/demo/pipeline.yml"), workdir, size, None)
    jobs = load_jobs(workdir)
    first = min(_at(j["status"]["created"]) for j in jobs.values())
    last = max(_at(j["status"]["completion_time"]) for j in jobs.values())
    wall = wall_s or (last - first).total_seconds()
    t0 = last - timedelta(seconds=wall)  # the demo's start
    out = {}
    for share in SHARES:
        t = t0 + timedelta(seconds=share * wall)
        fc = run_forecast(cfg, state_at(cfg, jobs, t0, t), t)
        out[f"{share:.2f}"] = round((share * wall + fc.remaining_s - wall) / wall, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="DIR[:WALL_S]")
    args = parser.parse_args()
    results = {}
    for arg in args.runs:
        where, _, wall = arg.partition(":")
        results[where] = replay(Path(where), float(wall) if wall else None)
        cells = " ".join(f"{s}: {e:+.1%}" for s, e in results[where].items())
        print(f"{where}: {cells}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
