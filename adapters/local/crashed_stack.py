"""What a `pipeline local up` killed outright (SIGKILL, an OOM kill, a closed terminal's
SIGHUP) left behind, found from its `stack.json` and stopped before a new stack starts there.

The control plane dies with the stack (its processes get SIGKILL when it does); the
emulators are started from a pool's threads, so no death signal can follow them, and they
keep their ports and their Java heaps until someone stops them. `stack.json` records the
process group of each; a stack whose own process is gone has its groups stopped here.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from adapters.local.process_groups import group_alive, signal_group

STACK_FILE = "stack.json"


class StackRunningError(RuntimeError):
    """A live `pipeline local up` owns the folder."""


@dataclass(frozen=True)
class Leftover:
    """A process group a crashed stack left running."""

    name: str
    pgid: int


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
    except OSError:  # not Linux: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


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
    groups = {**doc.get("pids", {}), **doc.get("emulator_pids", {})}
    return [Leftover(name, int(pgid)) for name, pgid in groups.items() if group_alive(int(pgid))]


def stop_leftovers(state_dir: Path, found: list[Leftover]) -> None:
    """SIGKILL each left-over group (what was in it had no one to stop for) and remove the
    crashed stack's files, so `local up` can start there."""
    for item in found:
        signal_group(item.pgid, signal.SIGKILL)
    for name in (STACK_FILE, "kubeconfig"):
        (state_dir / name).unlink(missing_ok=True)
