"""The pure core of one reconcile: `plan_for` (every layer's spec and rendered Job) and
`decide`, for the demo config and a large graph (a 2048^3-chunk layer 2, 13 layers, every
stage), for a fresh run (every layer waiting: every manifest rendered) and one whose ingest
is done (only meshing and l2cache are rendered). Prints a table and a final JSON line.

    python bench/bench_plan.py
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from shared.config.config import PipelineConfig
from shared.config.config_files import config_from_dict, load_config
from shared.model.phase import Phase
from shared.reconcile.build_plan import new_run, plan_for
from shared.reconcile.decide import decide
from shared.reconcile.decision import Snapshot

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo" / "pipeline.yml"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def big(cfg: PipelineConfig) -> PipelineConfig:
    """The demo config over a volume of 2048^3 chunks of 256^3 voxels."""
    dataset = cfg.ds.model_dump(mode="json")
    dataset["data_source"]["size"] = [2048 * 256] * 3
    dataset["graph_config"]["CHUNK_SIZE"] = [256] * 3
    raw = cfg.model_dump(mode="json", exclude={"dataset_config"})
    return config_from_dict(raw, dataset)


def per_call_ms(fn, repeat: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat * 1000


def main() -> None:
    demo = load_config(DEMO)
    rows = []
    for name, cfg in (("demo", demo), ("2048^3 chunks", big(demo))):
        for state in ("fresh", "ingest done"):
            run = new_run(cfg, "r1", ["ingest", "l2cache", "meshing"], "auto", T0)
            for ls in run.layers.values():
                if state == "ingest done" and ls.stage == "ingest":
                    ls.phase = Phase.SUCCEEDED
            plan = plan_for(cfg, run)
            rows.append(
                {
                    "config": f"{name}, {state}",
                    "layers": len(run.layers),
                    "rendered": sum(lp.manifest is not None for lp in plan.layers.values()),
                    "plan_ms": round(per_call_ms(lambda c=cfg, r=run: plan_for(c, r), 50), 2),
                    "decide_ms": round(
                        per_call_ms(lambda r=run, p=plan: decide(Snapshot(r), p, None, T0), 200), 3
                    ),
                }
            )
    print(f"{'config':<28}{'layers':>8}{'rendered':>10}{'plan_for ms':>14}{'decide ms':>12}")
    for r in rows:
        print(
            f"{r['config']:<28}{r['layers']:>8}{r['rendered']:>10}{r['plan_ms']:>14}"
            f"{r['decide_ms']:>12}"
        )
    print(json.dumps({"bench": "plan", "rows": rows}))


if __name__ == "__main__":
    main()
