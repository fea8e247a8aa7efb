"""Reading a worker pod's log: its JSON lines rendered for a terminal, the failing chunk, and
the error a pod (a setup pass's) ended with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from shared.model.worker_contract import LOG


def _records(text: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    for raw in text.splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None
        yield raw, rec if isinstance(rec, dict) else None


def render_log(text: str) -> list[str]:
    """Worker JSON lines as `time severity message [chunk, exit]`, tracebacks unfolded;
    other lines as they are."""
    out: list[str] = []
    for raw, rec in _records(text):
        if rec is None:
            out.append(raw)
            continue
        tags = [f"chunk {rec[LOG.chunk]}"] if rec.get(LOG.chunk) else []
        tags += [f"exit {rec[LOG.exit_code]}"] if rec.get(LOG.exit_code) is not None else []
        severity, message = rec.get(LOG.severity, ""), rec.get(LOG.message, "")
        line = f"{rec.get(LOG.time, '')} {severity:<7} {message}"
        out.append(line.strip() + (f"  [{', '.join(tags)}]" if tags else ""))
        if rec.get(LOG.traceback):
            out += ["    " + t for t in str(rec[LOG.traceback]).rstrip().splitlines()]
    return out


def failing_chunk(text: str) -> dict[str, Any] | None:
    """The last worker record that carries a traceback (the failure that ended the pod)."""
    found = None
    for _, rec in _records(text):
        if rec is not None and rec.get(LOG.traceback):
            found = rec
    return found


def last_error(text: str) -> dict[str, Any] | None:
    """The failure a pod's log ends with: the last record with a traceback, else the last
    ERROR record (a setup that refused its input logs no traceback)."""
    found = failing_chunk(text)
    if found is not None:
        return found
    errors = [rec for _, rec in _records(text) if rec and rec.get(LOG.severity) == "ERROR"]
    return errors[-1] if errors else None
