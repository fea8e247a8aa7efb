"""Alert bodies for the `alerts` topic: JSON objects, published with a `kind` attribute.

Every body has `kind`, `run_id`, `graph_id`, `stage`, `layer` (empty/0 for run-wide alerts)
and `at` (ISO time of the decision), plus the kind's details:

- `approval_needed`: `advance`
- `failed_indexes`: `indexes`, `job`, and `batches` [{`index`, `chunks`, `log_tail`}]
- `layer_failed`: `reason`, and `failed_indexes` (the Job failed) or `fix` (it was refused)
- `layer_stalled`: `no_progress_s`
- `budget_reached`: `spend_usd`, `budget_usd`
- `run_finished`: `status`
- `run_unhealthy`: `error`, `failures` (consecutive failed reconciles), `since`

A batch's chunks are computed here (`shared.layer_spec`); its `log_tail` is empty in the
committed body and filled by the controller when it publishes, best effort. Pure module.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.config import PipelineConfig
from shared.layer_spec import layer_spec
from shared.reconcile import Alert
from shared.state import RunState

LOG_TAIL_LINES = 30  # lines of a failed pod's log an alert carries


def alert_body(cfg: PipelineConfig, run: RunState, alert: Alert, now: datetime) -> dict[str, Any]:
    """The body of one alert of `run` (its config `cfg`), decided at `now`."""
    body: dict[str, Any] = {
        "kind": alert.kind,
        "run_id": run.run_id,
        "graph_id": run.graph_id,
        "stage": alert.stage,
        "layer": alert.layer,
        "at": now.isoformat(),
        **alert.details,
    }
    if alert.kind == "failed_indexes":
        spec = layer_spec(cfg, alert.stage, alert.layer)
        body["batches"] = [
            {"index": i, "chunks": [list(c) for c in spec.batch_chunks(i)], "log_tail": ""}
            for i in alert.details["indexes"]
        ]
    return body


def tail_requests(body: dict[str, Any]) -> list[tuple[str, int]]:
    """(Job name, index) of each batch whose log tail the published alert should carry."""
    if body.get("kind") != "failed_indexes":
        return []
    return [(body["job"], int(b["index"])) for b in body.get("batches", [])]


def with_log_tails(body: dict[str, Any], tails: dict[int, str]) -> dict[str, Any]:
    """A copy of `body` whose batches carry the fetched log tails (by index)."""
    batches = [{**b, "log_tail": tails.get(int(b["index"]), "")} for b in body["batches"]]
    return {**body, "batches": batches}


def run_unhealthy_body(
    run_id: str, error: str, failures: int, since: datetime, now: datetime
) -> dict[str, Any]:
    """The alert for a run the controller has failed to reconcile `failures` times in a row
    (sent once per spell; the other runs go on). Its `alert_id` names the spell."""
    return {
        "kind": "run_unhealthy",
        "alert_id": f"run_unhealthy-{run_id}-{since.isoformat()}",
        "run_id": run_id,
        "graph_id": "",
        "stage": "",
        "layer": 0,
        "at": now.isoformat(),
        "error": error,
        "failures": failures,
        "since": since.isoformat(),
        "fix": f"see the error; fix the run's cause, or `pipeline pause {run_id}`",
    }
