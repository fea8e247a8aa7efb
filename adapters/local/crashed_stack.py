"""What a `pipeline local up` killed outright (SIGKILL, an OOM kill, a closed terminal's
SIGHUP) left behind, found from its `stack.json` and stopped before a new stack starts there.

The control plane dies with the stack (its processes get SIGKILL when it does); the
emulators are started from a pool's threads, so no death signal can follow them, and they
keep their ports and their Java heaps until someone stops them. `stack.json` records each
emulator's process group and its leader's start time: pids are reused within minutes on a
busy machine, so a group is stopped only while its leader is the process recorded (or, the
leader gone, while its group still has members: the kernel does not hand out a pid in use as
a group id).
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.local.process_groups import group_alive, signal_group, start_ticks

STACK_FILE = "stack.json"


class StackRunningError(RuntimeError):
    """A live `pipeline local up` owns the folder."""


@dataclass(frozen=True)
class Leftover:
    """A process group a crashed stack left running."""

    name: str
    pgid: int


def _alive(pid: int) -> bool:
    if start_ticks(pid) is not None:
        return True
    try:  # not Linux, or gone: ask the kernel (a zombie counts as gone on Linux above)
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return not Path("/proc").is_dir()


def still_ours(pgid: int, started: int | None) -> bool:
    """True while the group recorded as (``pgid``, leader started at ``started``) runs."""
    now = start_ticks(pgid)
    if now is not None:
        return now == started  # the leader lives: ours only if it is the same process
    return group_alive(pgid)  # the leader is gone; members keep the id from being reused


def leftovers(state_dir: Path) -> list[Leftover] | None:
    """The groups a crashed stack in ``state_dir`` left running ([] if none); None when
    there is no stack file. Raises StackRunningError when the stack's own process lives."""
    path = state_dir / STACK_FILE
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    owner = int(doc.get("pid", 0))
    if owner and _alive(owner):
        raise StackRunningError(
            f"a local stack is running in {state_dir} (pid {owner}): stop it with Ctrl-C in "
            f"its terminal or `kill {owner}`, or start this one with another --state-dir"
        )
    groups: dict[str, Any] = doc.get("emulator_groups", {})
    return [
        Leftover(name, int(g["pgid"]))
        for name, g in groups.items()
        if still_ours(int(g["pgid"]), g.get("started"))
    ]


def stop_leftovers(state_dir: Path, found: list[Leftover]) -> None:
    """SIGKILL each left-over group (what was in it had no one to stop for) and remove the
    crashed stack's files, so `local up` can start there."""
    for item in found:
        signal_group(item.pgid, signal.SIGKILL)
    for name in (STACK_FILE, "kubeconfig"):
        (state_dir / name).unlink(missing_ok=True)
