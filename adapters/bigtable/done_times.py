"""When chunks were marked done, read from each run's graph table: the done-marker signal of
the controller's hung-pod check (`shared.reconcile.hung_pods.DoneMarkerTimes`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from kvdbclient import BigTableClient

from adapters.bigtable.chunk_ledger import (
    BigtableChunkLedger,
    close_bigtable_client,
    open_bigtable_client,
)
from shared.config.config import PipelineConfig

_UNUSED_EXPIRY = timedelta(minutes=1)  # a client needs one; reading markers takes no claim


class BigtableDoneTimes:
    """Reads done markers' write times; one client per graph table, kept for reuse (a warm
    Cloud Function serves many ticks). `close` releases them."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str, str], BigTableClient] = {}
        self._lock = threading.Lock()

    def _client(self, cfg: PipelineConfig) -> BigTableClient:
        key = (cfg.bigtable.project, cfg.bigtable.instance, cfg.graph_id)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = open_bigtable_client(
                    cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance, _UNUSED_EXPIRY
                )
            return self._clients[key]

    def newest_done(
        self, cfg: PipelineConfig, stage: str, chunk_ids: Sequence[int]
    ) -> datetime | None:
        """The newest done marker's write time among `chunk_ids` of `stage` (None: none)."""
        return BigtableChunkLedger(self._client(cfg), stage).newest_done_at(chunk_ids)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            close_bigtable_client(client)
