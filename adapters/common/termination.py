"""SIGTERM and SIGHUP as an exception, so a process that is told to stop cleans up first.

By default SIGTERM (`timeout`, `kill`, a CI runner) and SIGHUP (a closed terminal) end a
Python process at once: no `finally`, no context manager's exit, no atexit hook runs. What it
started in process groups of its own (the emulators, the local cluster's pods) does not get
the signal and keeps running. `unwind_on_termination()` turns these signals into
`Terminated`, which unwinds the main thread like Ctrl-C does, so `with EmulatorSet()`,
`with LocalStack()` and their atexit safety nets stop every process group by its PID.
Standard library only.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

log = logging.getLogger(__name__)

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived. A KeyboardInterrupt, so that it passes every `except
    Exception` and test runners stop and tear down as on Ctrl-C; `exit_code` is the shell's
    128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # Once only: a second signal while the first one's cleanup runs would cut it short
    # (SIGKILL still ends the process at once).
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is _raise_terminated:
            signal.signal(sig, _already_stopping)
    raise Terminated(signum)


def _already_stopping(signum: int, frame: FrameType | None) -> None:
    log.warning("%s: already stopping", signal.Signals(signum).name)


def unwind_on_termination() -> None:
    """From now on SIGTERM and SIGHUP raise `Terminated` in the main thread instead of
    killing the process outright. Only a signal still at its default action is changed (a
    handler the program installed, e.g. `pipeline local up`'s, stays); a no-op off the main
    thread, where Python cannot install handlers. Idempotent."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _raise_terminated)


def leave_now(code: int, message: str) -> NoReturn:
    """Print `message` on stderr, run the atexit hooks (the emulators' safety net) and end
    the process without the interpreter's shutdown. Call it where a Ctrl-C or `Terminated`
    arrives, after every `finally` and `with` block ran on the way there: a gRPC call cut
    short by the interrupt can leave its channel waiting at shutdown for ever (and a second
    Ctrl-C then prints that wait's traceback)."""
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
    try:
        print(message, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing left to tell
        pass
    atexit._run_exitfuncs()  # what a normal exit would run first
    os._exit(code)


def run_script(main: Callable[[], object]) -> None:
    """A script's entry point (the bench/ scripts): `main()`, with SIGTERM and SIGHUP
    unwinding it like Ctrl-C; once stopped and cleaned up, one line and exit 130 (Ctrl-C) or
    128 + the signal instead of a traceback."""
    unwind_on_termination()
    try:
        main()
    except Terminated as e:
        leave_now(e.exit_code, f"stopped by {e}")
    except KeyboardInterrupt:
        leave_now(130, "interrupted")
