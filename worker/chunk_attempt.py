"""One attempt at a chunk, begun: the prior unfinished attempt read, this one recorded, the
plugin's context built (docs/job-and-worker-contract.md#crash-safety)."""

from __future__ import annotations

from typing import Any

from shared.ports.chunk_ledger import ChunkLedger
from worker.env import WorkerEnv
from worker.errors import ClaimLostError
from worker.fault_points import pause_point
from worker.logs import JsonLogger
from worker.plugins import ChunkContext

__all__ = ["begin_attempt"]


def begin_attempt(
    ledger: ChunkLedger,
    env: WorkerEnv,
    client: Any,
    token: int,
    cid: int,
    coord: tuple[int, int, int],
    clog: JsonLogger,
) -> ChunkContext:
    """Begin ``token``'s attempt at chunk ``cid`` (claimed): read what an unfinished earlier
    attempt left (before recording ours overwrites it), record ours (fenced: raises
    :class:`~worker.errors.ClaimLostError` if the claim is no longer ours) and return the
    plugin's context, ``recovering`` set if there was such an attempt."""
    pause_point("after_claim", clog)
    prior = ledger.prior_attempt(cid, token)
    if not ledger.begin(cid, token):
        raise ClaimLostError(f"chunk {cid}: the claim was lost before the work began")
    pause_point("after_begin", clog)
    if prior is not None:
        clog.warning(
            f"chunk {env.layer}_{coord}: an earlier attempt (token {prior.token}) did not "
            "finish; the workload recomputes it and cleans up after that attempt",
            previous_token=prior.token,
            recovering=True,
        )

    def save_note(note: bytes) -> None:
        if not ledger.save_note(cid, token, note):
            raise ClaimLostError(f"chunk {cid}: the claim was lost; the note was not saved")

    return ChunkContext(
        graph_id=env.graph_id,
        stage=env.stage,
        layer=env.layer,
        coord=coord,
        chunk_id=cid,
        n_layers=env.n_layers,
        dataset=env.dataset,
        client=client,
        logger=clog,
        run_id=env.run_id,
        token=token,
        recovering=prior is not None,
        previous_token=prior.token if prior is not None else None,
        note=prior.note if prior is not None else None,
        save_note=save_note,
    )
