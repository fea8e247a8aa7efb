"""Print what the Job of every ingest layer asks of its pods, from the rendered manifests.

    python3 scripts/ingest_layer_figures.py [examples/predecessor/pipeline.yml]

One row per ingest layer: requests, PCG_N_PROCESSES, PCG_HELD_MAX_WAIT_SEC (the image's
default, 120 s, where the Job sets none) and terminationGracePeriodSeconds. It reads only the
rendered Job, so the same file run against an older tree (PYTHONPATH=that tree) prints its
figures too: CHANGELOG.md's before/after table of issue 26 was printed so.
"""

from __future__ import annotations

import sys
from pathlib import Path

from shared.config.config_files import load_config
from shared.config.stage_selection import stage_layers
from shared.jobs.manifest import render_job

DEFAULT = Path(__file__).resolve().parents[1] / "examples" / "predecessor" / "pipeline.yml"
IMAGE_HELD_WAIT_S = "120 (image default)"  # PyChunkedGraph's ingest worker without the env


def rows(config_path: Path) -> list[tuple[str, ...]]:
    """(layer, cpu, memory, processes, held wait, grace) of each ingest layer's Job."""
    cfg = load_config(config_path)
    out = []
    for layer in stage_layers(cfg, "ingest"):
        job = render_job(cfg, "ingest", layer, run_id="figures", parallelism=1)
        pod = job["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = {e["name"]: e.get("value", "") for e in container["env"]}
        req = container["resources"]["requests"]
        out.append(
            (
                f"L{layer}",
                req["cpu"],
                req["memory"],
                env.get("PCG_N_PROCESSES", "-"),
                env.get("PCG_HELD_MAX_WAIT_SEC", IMAGE_HELD_WAIT_S),
                str(pod.get("terminationGracePeriodSeconds", "30 (Kubernetes default)")),
            )
        )
    return out


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT
    header = ("layer", "cpu", "memory", "PCG_N_PROCESSES", "PCG_HELD_MAX_WAIT_SEC", "grace s")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows(path):
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
