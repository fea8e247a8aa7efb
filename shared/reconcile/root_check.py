"""The root layer's check: PyChunkedGraph's ingest harness runs the graph's own tests after
the root chunk is marked done. Pure: no I/O.

PyChunkedGraph's `pipeline.ingest.worker` hands the harness a `finalize` step
(`_verify_root`: `ingest.simple_tests.run_all(cg)` when the layer is the root), which
`pipeline.worker.run` calls only after a batch with no transient and no fatal chunk, and whose
failure exits 42 (FATAL: the Job's FailIndex rule fails the index at once). The chunk is
already marked done by then, so such a layer fails with every done marker written: it is not a
complete layer, and a re-submit skips the done chunk and re-runs only the check.

So a root layer of an image's ingest whose Job failed while the ledger holds every done marker
is the root check failing (an ingest chunk that fails is never marked done).
"""

from __future__ import annotations

from typing import Any

from shared.config.config import PipelineConfig
from shared.config.stage_selection import top_layer

INGEST = "ingest"
PCG_INGEST_MODULE = "pychunkedgraph.pipeline.ingest"  # the image's entry point's module
ALERT_KIND = "root_check_failed"
CHECK = "PyChunkedGraph's graph tests (ingest.simple_tests.run_all, the harness's finalize)"


def runs_root_check(cfg: PipelineConfig, stage: str, layer: int) -> bool:
    """Whether the pods of `stage`'s `layer` run PyChunkedGraph's root check: an image's
    ingest (`commands.ingest` runs its module) at the graph's root layer."""
    if stage != INGEST or PCG_INGEST_MODULE not in (cfg.commands.get(INGEST) or []):
        return False
    return layer == top_layer(cfg, INGEST)


def root_check_reason(run_id: str, stage: str, layer: int, failed_indexes: str) -> str:
    """The failed layer's reason: the check failed, the chunk is built."""
    return (
        f"root check failed: the root chunk is built and marked done, but {CHECK} failed "
        f"(exit 42; failed index {failed_indexes or '0'}); read the pod's log "
        f"(`pipeline inspect {run_id} {stage} {layer}`), fix the cause, then "
        f"`pipeline submit {run_id} {stage} {layer}` re-runs only the check (the done chunk "
        "is skipped)"
    )


def root_check_details(
    run_id: str, stage: str, layer: int, job_name: str, failed_indexes: str, chunks_marked: int
) -> dict[str, Any]:
    """The `root_check_failed` alert's details."""
    return {
        "job": job_name,
        "check": CHECK,
        "chunks_marked": chunks_marked,
        "failed_indexes": failed_indexes,
        "reason": root_check_reason(run_id, stage, layer, failed_indexes),
        "fix": f"pipeline inspect {run_id} {stage} {layer}; then pipeline submit {run_id} "
        f"{stage} {layer} (re-runs only the check)",
    }
