"""Worker exit codes and the errors that choose them (docs/job-and-worker-contract.md#exit-codes).

The Job's podFailurePolicy reads the exit code: 42 fails only that index (retrying cannot
help), 1 is retried up to ``backoffLimitPerIndex``, and a Spot preemption (SIGTERM, 143) is
ignored through the DisruptionTarget rule.
"""

from __future__ import annotations

__all__ = [
    "EXIT_FATAL",
    "EXIT_OK",
    "EXIT_PREEMPTED",
    "EXIT_TRANSIENT",
    "ClaimLostError",
    "FatalChunkError",
    "WorkerConfigError",
]

EXIT_OK = 0
EXIT_TRANSIENT = 1
EXIT_FATAL = 42
EXIT_PREEMPTED = 143  # 128 + SIGTERM


class FatalChunkError(Exception):
    """Raise from a workload when a chunk can never succeed (bad input, a bug): the worker
    logs the chunk and traceback and exits 42, failing only this index."""


class WorkerConfigError(Exception):
    """The worker's environment is missing or malformed (exit 42); the message names the
    variable and what a valid value looks like."""


class ClaimLostError(Exception):
    """The worker no longer holds (or can no longer keep) the chunk's claim: raised by
    ``ChunkContext.check_cancelled`` and ``ChunkContext.save_note``. Transient: the chunk is
    not marked done and is retried by another attempt."""
