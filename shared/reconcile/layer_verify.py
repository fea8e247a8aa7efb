"""What a reconcile makes of a completed layer's ledger check (pure; docs/verify.md).

The controller reads the ledger while it observes (a layer whose Job is Complete, of a stage
whose workers write done markers) and hands the verdict to :func:`decide` in the snapshot;
here, after the Job's Complete condition made the layer succeeded, the verdict is recorded on
the layer, and a layer with chunks unmarked is failed instead, with a `layer_incomplete`
alert naming the missing chunks and the fix. No verdict (a stage that writes no markers, or a
controller without a ledger reader) leaves the layer as the Job's condition made it.
"""

from __future__ import annotations

from datetime import datetime

from shared.model.phase import Phase
from shared.model.state import LayerState
from shared.reconcile.completeness import LayerVerdict, incomplete_details, incomplete_reason
from shared.reconcile.decision import Action, Alert


def apply_ledger_check(
    run_id: str, ls: LayerState, verdict: LayerVerdict | None, now: datetime, out: list[Action]
) -> None:
    """Record `verdict` on the just-succeeded layer `ls`; fail it if chunks are unmarked."""
    if verdict is None or ls.phase != Phase.SUCCEEDED:
        return
    ls.progress.chunks_marked = verdict.chunks_marked
    if verdict.complete:
        return
    ls.phase, ls.timing.finished_at = Phase.FAILED, now
    ls.failure_reason = incomplete_reason(run_id, verdict)
    out.append(Alert("layer_incomplete", ls.stage, ls.layer, incomplete_details(run_id, verdict)))
