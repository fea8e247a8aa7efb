"""The forecast (shared.forecast.forecast) replayed over finished demo runs, from their pod records.

A demo run with `--workdir DIR` keeps its cluster's Jobs and pods (created, started,
finished) in DIR/stack/cluster.json. For each run this rebuilds the run's layer state as the
controller would have stored it at 20, 30, 40, 50, 60 and 75 % of its wall time (completed
indexes, pods succeeded and their runtimes, pods under way, submissions and finishes) and
prints the forecast's error there, (predicted - actual) / actual. WALL_S is the demo's
`wall_s`; without it, the span from the first Job's creation to the last one's completion.

    pipeline demo --size 256 --json --workdir /tmp/d256   # note its wall_s
    python bench/bench_forecast.py /tmp/d256:482.25 /tmp/d128:118.77

In place of WALL_S, the file holding the demo's `--json` line: its `wall_s` is taken, and
where the run had a canary (`--canary N`), the canary's whole-build forecast is printed
against what the run measured (wall time, pods, cost), and the replay holds the canary's
measurements once its Job had completed (the in-run forecast's per-chunk time, a pod's
start-up and its wait, as `pipeline status` had them):

    pipeline demo --size 256 --canary 8 --json --workdir /tmp/c256 | tail -1 > /tmp/c256.json
    python bench/bench_forecast.py /tmp/c256:/tmp/c256.json

The last line is JSON: {DIR: {share: error, "canary": {...}}}.
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
from shared.reconcile.canary import CANARY_LABEL

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
            and CANARY_LABEL not in labels
        ):
            jobs[layer] = job
    return jobs


def canary_done_at(workdir: Path) -> datetime | None:
    """When the run's canary Job completed (None: no canary)."""
    for job in json.loads((workdir / "stack" / "cluster.json").read_text())["jobs"]:
        if CANARY_LABEL in job["status"]["labels"]:
            return _at(job["status"].get("completion_time"))
    return None


def state_at(
    cfg: PipelineConfig,
    jobs: dict[int, dict[str, Any]],
    t0: datetime,
    t: datetime,
    canary: tuple[datetime, dict[str, Any]] | None = None,
    ramp: list[list[Any]] | None = None,
):
    """The ingest run's layers as stored at `t` (what the pods had done by then); `canary`:
    when the canary completed and its record (the demo's `--json` figures); `ramp`: the
    demo's `bigtable.ramp_timeline` ([elapsed_s, parallelism, the gate's hold reason] each
    time one changed), for the running layer's parallelism and the run's hold at `t`."""
    run: RunState = new_run(cfg, "replay", ["ingest"], "auto", t0)
    seen = [r for r in ramp or [] if r[0] <= (t - t0).total_seconds()]
    held_at = seen[-1][1] if seen else None
    run.ramp_hold = seen[-1][2] if seen else ""
    if canary is not None and canary[0] <= t:
        l2 = run.layers[layer_key("ingest", 2)]
        l2.canary.phase, l2.canary.record = Phase.SUCCEEDED, dict(canary[1])
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
        ls.job.parallelism = held_at or status.get("parallelism") or 0
        # the gate re-anchors a held layer's ramp at each hold: at its latest one by `t`
        holds = [r[0] for r in seen if r[2] and t0 + timedelta(seconds=r[0]) >= created]
        if holds:
            ls.timing.ramp_started_at = t0 + timedelta(seconds=max(holds))
        finished = _at(status.get("completion_time"))
        if finished is not None and finished <= t:
            ls.phase, ls.timing.finished_at = Phase.SUCCEEDED, finished
    return run


def replay(
    workdir: Path,
    wall_s: float | None,
    canary: dict[str, Any] | None = None,
    ramp: list[list[Any]] | None = None,
) -> dict[str, float]:
    """The forecast's error at each share of the run's wall time (`canary`: the demo's
    `--json` canary, held from its Job's completion on; `ramp`: its ramp timeline)."""
    size = int(np.load(workdir / "volume.npy", mmap_mode="r").shape[0])
    cfg = prepare_config(load_config(ROOT / "examples/demo/pipeline.yml"), workdir, size, None)
    jobs = load_jobs(workdir)
    first = min(_at(j["status"]["created"]) for j in jobs.values())
    last = max(_at(j["status"]["completion_time"]) for j in jobs.values())
    wall = wall_s or (last - first).total_seconds()
    t0 = last - timedelta(seconds=wall)  # the demo's start
    done_at = canary_done_at(workdir) if canary else None
    held = (done_at, canary) if done_at is not None and canary is not None else None
    out = {}
    for share in SHARES:
        t = t0 + timedelta(seconds=share * wall)
        fc = run_forecast(cfg, state_at(cfg, jobs, t0, t, held, ramp), t)
        out[f"{share:.2f}"] = round((share * wall + fc.remaining_s - wall) / wall, 3)
    return out


def canary_against_measured(canary: dict[str, Any]) -> dict[str, float | None]:
    """The canary's whole-build forecast against what the run measured: each pair and the
    error (forecast - measured) / measured, from the demo's `--json` canary."""
    out: dict[str, float | None] = {}
    for what in ("wall_s", "pods", "cost_usd"):
        fc, real = canary.get(f"forecast_{what}"), canary.get(f"measured_{what}")
        out[f"forecast_{what}"], out[f"measured_{what}"] = fc, real
        out[f"error_{what}"] = round((fc - real) / real, 3) if fc is not None and real else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="DIR[:WALL_S|:SUMMARY.json]")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for arg in args.runs:
        where, _, tail = arg.partition(":")
        wall, canary, ramp = None, None, None
        if tail and not tail.endswith(".json"):
            wall = float(tail)
        elif tail:
            summary = json.loads(Path(tail).read_text().strip().splitlines()[-1])
            wall, canary = summary["wall_s"], summary.get("canary")
            ramp = summary.get("bigtable", {}).get("ramp_timeline")
            if isinstance(canary, list):  # one canary a stage: the demo builds ingest's
                canary = canary[0]
        results[where] = dict(replay(Path(where), wall, canary, ramp))
        cells = " ".join(f"{s}: {e:+.1%}" for s, e in results[where].items())
        print(f"{where}: in-run forecast {cells}")
        if canary:
            c = results[where]["canary"] = canary_against_measured(canary)
            print(
                f"{where}: canary forecast wall {c['forecast_wall_s']} s vs {c['measured_wall_s']}"
                f" s ({_pct(c['error_wall_s'])}), pods {c['forecast_pods']} vs"
                f" {c['measured_pods']}, cost ${c['forecast_cost_usd']} vs"
                f" ${c['measured_cost_usd']} ({_pct(c['error_cost_usd'])})"
            )
    print(json.dumps(results))


def _pct(error: float | None) -> str:
    return "n/a" if error is None else f"{error:+.1%}"


if __name__ == "__main__":
    main()
