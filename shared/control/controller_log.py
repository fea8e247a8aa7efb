"""The controller's structured log lines, and what they cost.

Every step of the controller logs one JSON object per line (severity, message and fields such
as run, stage, layer), which Cloud Logging parses. The bytes each run's lines took since the
last count are kept, because Logging volume is a line of the controller's own bill
(shared.money.controller_usage, docs/bigtable-ramp-and-bill.md).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from shared.control.alert_severity import ALERT_LOG_MESSAGE, alert_log_entry

_lock = threading.Lock()
_bytes_by_run: dict[str, int] = {}


def log_json(logger: logging.Logger, severity: str, message: str, **fields: Any) -> None:
    """Log one structured line; count its bytes against its `run`, if it names one."""
    line = json.dumps({"severity": severity, "message": message, **fields}, default=str)
    if "run" in fields:
        run = str(fields["run"])
        with _lock:
            _bytes_by_run[run] = _bytes_by_run.get(run, 0) + len(line)
    logger.info(line)


def take_log_bytes(run_id: str) -> int:
    """The bytes `run_id`'s lines took since the last take (and start counting again)."""
    with _lock:
        return _bytes_by_run.pop(run_id, 0)


def log_published_alert(
    logger: logging.Logger, kind: str, body: dict[str, Any], **extra: Any
) -> None:
    """The one structured entry of a published alert (shared.control.alert_severity): what
    terraform/alerts.tf's log-based policies turn into notifications. `extra`: fields of
    the publisher's own (e.g. a dead letter's topic)."""
    entry = alert_log_entry(kind, body)
    log_json(logger, entry.level, ALERT_LOG_MESSAGE, **{**extra, **entry.fields})
