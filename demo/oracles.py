"""The demo's verdict: the tables the run built, compared stage by stage with a direct
whole-volume computation (the oracles: ingest, and l2cache and meshing if they ran)."""

from __future__ import annotations

from typing import Any

from demo.oracle import compare, expected_stats, observed_stats
from demo.oracle_stages import check_l2cache, check_meshing
from shared.config.config import PipelineConfig
from shared.model.state import RunState


def check_all(
    cfg: PipelineConfig,
    run: RunState,
    volume: Any,
    n_layers: int,
    nodes: list,
    rows: dict[str, dict[int, Any]],
) -> dict[str, Any]:
    """Every stage's verdict: ``{"ok", "mismatches" (all, stage-prefixed), "ingest": {...},
    "l2cache": {...}, "meshing": {...}}`` (the passes only if they ran)."""
    chunk_size = cfg.ds.graph_config.CHUNK_SIZE
    bits = cfg.ds.graph_config.SPATIAL_BITS
    ingest = compare(expected_stats(volume, chunk_size, n_layers), observed_stats(nodes, n_layers))
    verdicts: dict[str, dict[str, Any]] = {
        "ingest": {"ok": ingest.ok, "mismatches": ingest.mismatches[:20]}
    }
    if "l2cache" in rows:
        result = check_l2cache(volume, chunk_size, nodes, rows["l2cache"], n_layers, bits)
        verdicts["l2cache"] = result.to_dict()
    if "meshing" in rows:
        top = run.top_layers["meshing"]
        result = check_meshing(volume, chunk_size, nodes, rows["meshing"], n_layers, top, bits)
        verdicts["meshing"] = result.to_dict()
    mismatches = [
        line if line.startswith(stage) else f"{stage}: {line}"
        for stage, verdict in verdicts.items()
        for line in verdict["mismatches"]
    ]
    ok = all(v["ok"] for v in verdicts.values())
    return {"ok": ok, "mismatches": mismatches[:20], **verdicts}
