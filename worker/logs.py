"""Structured JSON logs for the worker: one object per line on stdout.

Every line carries ``severity``, ``message``, ``time`` and the bound context (``run``,
``stage``, ``layer``, ``index``); chunk lines add ``chunk`` ("3_(46, 5, 29)") and ``coord``;
failures add ``traceback``, the last line ``exit_code``. The names are the contract's
(``shared.model.worker_contract.LOG``). Cloud Logging reads ``severity``/``message`` from such
lines, and the operator's ``inspect`` and the alerts read the rest.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any, TextIO

from shared.model.worker_contract import LOG

__all__ = ["JsonLogger", "JsonLogHandler"]

_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, tuple | set):
        return list(value)
    return str(value)


class JsonLogger:
    """Writes JSON log lines with bound fields; :meth:`bind` returns a child with more."""

    def __init__(self, stream: TextIO | None = None, level: str = "INFO", **fields: Any) -> None:
        self._stream = stream
        self._fields = fields
        self._lock = threading.Lock()
        self.level = _LEVELS.get(level.upper(), 20)

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def bind(self, **fields: Any) -> JsonLogger:
        child = JsonLogger(self._stream, **{**self._fields, **fields})
        child.level = self.level
        child._lock = self._lock  # one lock per stream: lines never interleave
        return child

    def log(self, severity: str, message: str, **fields: Any) -> None:
        if _LEVELS.get(severity, 20) < self.level:
            return
        record = {
            LOG.severity: severity,
            LOG.message: message,
            LOG.time: _now_rfc3339(),
            **self._fields,
            **fields,
        }
        line = json.dumps(record, default=_jsonable)
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def debug(self, message: str, *args: Any, **fields: Any) -> None:
        self.log("DEBUG", message % args if args else message, **fields)

    def info(self, message: str, *args: Any, **fields: Any) -> None:
        self.log("INFO", message % args if args else message, **fields)

    def warning(self, message: str, *args: Any, **fields: Any) -> None:
        self.log("WARNING", message % args if args else message, **fields)

    def error(self, message: str, *args: Any, **fields: Any) -> None:
        self.log("ERROR", message % args if args else message, **fields)

    def critical(self, message: str, *args: Any, **fields: Any) -> None:
        self.log("CRITICAL", message % args if args else message, **fields)

    def flush(self) -> None:
        for stream in (self.stream, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


class JsonLogHandler(logging.Handler):
    """Routes stdlib ``logging`` records (kvdbclient, google clients) into a JsonLogger, so
    stdout stays one JSON object per line."""

    def __init__(self, logger: JsonLogger, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self._logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name}
            if record.exc_info:
                fields[LOG.traceback] = logging.Formatter().formatException(record.exc_info)
            self._logger.log(record.levelname, record.getMessage(), **fields)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def _now_rfc3339() -> str:
    """Now in UTC to the millisecond (RFC 3339, as Cloud Logging reads `time`): the canary
    times a pod's end from its summary line, where Kubernetes' pod times are whole seconds."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    return f"{stamp}.{int(now % 1 * 1000):03d}Z"
