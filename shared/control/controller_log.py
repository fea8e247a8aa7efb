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
