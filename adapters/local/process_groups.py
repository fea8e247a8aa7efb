"""Processes started in their own process group, and stopped as a group.

A wrapper script (the Firestore emulator's bash launcher, a pod's shell) may leave children
behind when its leader exits; signalling the whole group, and waiting until no live process
of it remains, is what guarantees nothing is left running. Standard library only.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
POLL_INTERVAL = 0.05
LOG_TAIL_CHARS = 4000


_SETPRIV = shutil.which("setpriv")  # util-linux, essential on Debian


def dying_with_parent(argv: list[str]) -> list[str]:
    """``argv`` so that the child gets SIGKILL when the thread that started it ends (so only
    for children started by a thread that lives as long as they should): a parent killed
    outright (SIGKILL, a test's hard timeout) leaves no process group behind that its
    unwinding would have stopped. util-linux's ``setpriv --pdeathsig`` sets it and execs
    ``argv``; not ``Popen(preexec_fn=...)``, which makes Python fork() instead of vfork(),
    and a fork() runs gRPC's at-fork handlers, whose restarted poller aborts the child once
    Popen closes its descriptors (an API server that "exited with -6", epoll_wait EBADF).
    Without setpriv (not Linux) ``argv`` as it is."""
    if _SETPRIV is None:
        return argv
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]


def start_group_dying_with_parent(
    argv: list[str], out: IO[bytes], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of its own process group (stopped as one by
    :func:`kill_group`), its output to ``out``, SIGKILLed when the calling thread ends.
    The death signal is set by setpriv before it execs ``argv``: a caller SIGKILLed in that
    first instant (before the exec) leaves the child without it."""
    return subprocess.Popen(
        dying_with_parent(argv),
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is left in process group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: zombies count as alive, good enough
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited while we looked
        # "pid (comm) state ppid pgrp ..." and comm may contain spaces or parentheses
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc/<pid>/stat field 22); None
    if it is gone or this is not Linux. A pid with the recorded start is the same process:
    pids are reused within minutes on a busy machine (pid_max is often 32768)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 and fields[0] != "Z" else None


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def wait_group(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Reap the leader and wait for the rest of its group to go; False on timeout."""
    while True:
        proc.poll()
        if proc.returncode is not None and not group_alive(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL)


def kill_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process group led by ``proc``; SIGKILL whatever is left after ``timeout``."""
    signal_group(proc.pid, signal.SIGTERM)
    if wait_group(proc, time.monotonic() + timeout):
        return
    log.warning("process group %d ignored SIGTERM for %.1f s; sending SIGKILL", proc.pid, timeout)
    signal_group(proc.pid, signal.SIGKILL)
    if not wait_group(proc, time.monotonic() + 5.0):
        log.error("process group %d still has processes after SIGKILL", proc.pid)


def log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - chars))
            return fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"<log unreadable: {exc}>"
