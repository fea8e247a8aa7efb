"""A Python command run on a pseudo-terminal, as an operator's shell runs it: rich draws its
live views as on a real terminal, and signals go to the command alone.

`screen()` is everything it printed (stdout and stderr), escape sequences removed. Timeouts
are failure conditions: `wait_for` and `wait` raise AssertionError naming what hung, and
leaving the `with` block kills whatever is left of the command's process group.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.local.process_groups import kill_group

ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")


class TerminalSession:
    """`with TerminalSession(["-m", "scripts.cli", ...], env=...) as term:`."""

    def __init__(
        self,
        python_args: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        rows: int = 40,
        columns: int = 120,
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, *python_args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm-256color", "COLUMNS": str(columns)},
            cwd=cwd,
            start_new_session=True,  # its own group: killed as one if it hangs
        )
        os.close(slave)
        self._master = master
        self._out = bytearray()
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:  # the command exited and the pty closed
                data = b""
            with self._changed:
                if not data:
                    self._changed.notify_all()
                    return
                self._out += data
                self._changed.notify_all()

    def screen(self) -> str:
        with self._changed:
            text = self._out.decode("utf-8", errors="replace")
        return ESCAPES.sub("", text).replace("\r", "")

    def wait_for(self, text: str, timeout: float) -> None:
        """Until `text` is on screen; AssertionError (with the screen) if it never comes."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: text in self.screen() or not self._reader.is_alive(), timeout
            )
        if not found or text not in self.screen():
            raise AssertionError(f"{text!r} never appeared; screen:\n{self.screen()}")

    def send_signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """The exit code; AssertionError if the command is still running after `timeout`."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running {timeout:g} s later (hung); screen:\n{self.screen()}"
            ) from None
        self._reader.join(timeout=timeout)  # the rest of its output
        return code

    def __enter__(self) -> TerminalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            kill_group(self.proc, timeout=5.0)  # type: ignore[arg-type]
        self._reader.join(timeout=5.0)
        os.close(self._master)
