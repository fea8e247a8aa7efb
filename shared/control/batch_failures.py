"""How a failed batch (a Job index) failed, from its attempts: a sign of bad input that is not
exit 42. Pure: no I/O.

Only PyChunkedGraph's ingest exits 42 on bad input (its `FatalChunkError`). Its meshing,
migration and the L2 cache treat every exception as transient (exit 1), so a batch whose input
is bad is retried until `job.task_retries` runs out and then fails like any other. What tells
it apart is that every attempt failed the same way: the same exit code and the same error line
in its log (the exception a traceback ends with). A batch whose attempts differ (a Bigtable
error, then a lost claim, then a preemption) is bad luck, not bad input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

FATAL_EXIT = 42
_TRACEBACK = "Traceback (most recent call last):"
# A memory address or a long number (a pid, a token, a time) varies between attempts that
# failed the same way; the exception's type and text otherwise do not.
_VARYING = re.compile(r"0x[0-9a-fA-F]+|\d{5,}")


class BatchFailure(Enum):
    """What a failed batch's attempts say about its cause."""

    FATAL_EXIT = "fatal_exit"  # exit 42: the worker itself called its input bad (ingest)
    SAME_EVERY_ATTEMPT = "same_every_attempt"  # every attempt failed identically: bad input?
    VARYING = "varying"  # the attempts failed differently (or too few to tell)


@dataclass(frozen=True)
class Attempt:
    """One finished attempt of a batch: its exit code and its log's tail."""

    exit_code: int | None
    log_tail: str


@dataclass(frozen=True)
class BatchVerdict:
    """The verdict on a failed batch, as its alert entry carries it."""

    failure: BatchFailure
    attempts: int
    exit_codes: tuple[int | None, ...]
    error: str  # the error line shared by every attempt ("" unless SAME_EVERY_ATTEMPT/FATAL)


def _plain(log_tail: str) -> str:
    """The log as text: a JSON log record (our worker's, shared.model.worker_contract) is
    replaced by its traceback, else its message; other lines stay as they are."""
    out = []
    for line in log_tail.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(record, dict):
            out.append(str(record.get("traceback") or record.get("message") or ""))
        else:
            out.append(line)
    return "\n".join(out)


def error_line(log_tail: str) -> str:
    """The error a log ends with: the last non-empty line after its last traceback (the
    exception), else its last non-empty line; numbers that vary between runs masked. JSON
    log records are read for their traceback or message."""
    text = _plain(log_tail).rsplit(_TRACEBACK, 1)[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _VARYING.sub("#", lines[-1]) if lines else ""


def classify(attempts: Sequence[Attempt]) -> BatchVerdict:
    """The verdict on a batch from its finished attempts (oldest first). Two or more attempts
    with one exit code and one non-empty error line are SAME_EVERY_ATTEMPT; any exit 42 is
    FATAL_EXIT."""
    codes = tuple(a.exit_code for a in attempts)
    errors = {error_line(a.log_tail) for a in attempts}
    shared = next(iter(errors)) if len(errors) == 1 else ""
    if FATAL_EXIT in codes:
        fatal = [error_line(a.log_tail) for a in attempts if a.exit_code == FATAL_EXIT]
        return BatchVerdict(BatchFailure.FATAL_EXIT, len(attempts), codes, fatal[-1])
    if len(attempts) >= 2 and len(set(codes)) == 1 and shared:
        return BatchVerdict(BatchFailure.SAME_EVERY_ATTEMPT, len(attempts), codes, shared)
    return BatchVerdict(BatchFailure.VARYING, len(attempts), codes, "")
