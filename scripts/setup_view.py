"""How the commands that show a layer show a stage's setup pass (`RUN STAGE 0`): its heading,
the error its pod ended with, and the fix (docs/setup-passes.md)."""

from __future__ import annotations

from typing import Any

from scripts.services import connect
from scripts.worker_logs import last_error
from shared.model.phase import Phase
from shared.model.state import SETUP_LAYER, RunState, SetupState


def layer_alerts(run_id: str, stage: str, layer: int) -> list[Any]:
    """The run's alerts about one layer (layer 0: the stage's setup pass), oldest first."""
    alerts = connect().store.all_alerts(run_id)
    return [a for a in alerts if a.body.get("stage") == stage and a.body.get("layer") == layer]


def setup_heading(run: RunState, setup: SetupState) -> str:
    """`ingest setup of run r1: failed (reason) · job … · attempt 1`."""
    head = f"{setup.stage} setup of run {run.run_id}: {setup.phase}"
    if setup.failure_reason:
        head += f" ({setup.failure_reason})"
    parts = [head, f"job {setup.job_name}" if setup.job_name else "no Job yet"]
    return " · ".join([*parts, f"attempt {setup.attempt + 1}"])


def setup_fix(run: RunState, setup: SetupState, alerts: list[Any]) -> str:
    """A failed setup's fix: its latest `setup_failed` alert's (the controller's word, e.g.
    the table to delete), else the re-submit; "" unless it failed."""
    if setup.phase != Phase.FAILED:
        return ""
    for alert in reversed(alerts):
        if alert.kind == "setup_failed" and alert.body.get("fix"):
            return str(alert.body["fix"])
    return f"fix the cause, then `pipeline submit {run.run_id} {setup.stage} {SETUP_LAYER}`"


def setup_error(log_text: str) -> str:
    """The error the setup pod's log ends with, as one line ("" if it logged none)."""
    found = last_error(log_text)
    if found is None:
        return ""
    code = found.get("exit_code")
    return str(found.get("message", "")) + (f" (exit {code})" if code is not None else "")
