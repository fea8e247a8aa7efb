"""What the process kubelet measures of a pod's container from /proc: its peak resident memory
and its CPU over its life (`LifeUsage`, sampled while it runs), kept for Cloud Monitoring's part
of the local stack (`adapters.local.pod_usage`). Linux only: elsewhere nothing is measured.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

PROC = Path("/proc")
GIB = 1024**3


# -- /proc parsing (pure) ------------------------------------------------------------------


def parse_stat_cpu_ticks(text: str) -> int:
    """utime + stime (clock ticks) from a `/proc/<pid>/stat` line.

    The command name (field 2) is in parentheses and may itself contain spaces and ")", so
    the fields are counted from the last ")". ValueError if the line is not a stat line."""
    head, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or "(" not in head or len(fields) < 13:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return int(fields[11]) + int(fields[12])


def parse_status_rss_bytes(text: str) -> int | None:
    """VmRSS from `/proc/<pid>/status` in bytes; None when absent (kernel threads, zombies)."""
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) < 2:
                raise ValueError(f"malformed VmRSS line: {line!r}")
            unit = parts[2].lower() if len(parts) > 2 else "kb"
            scale = {"kb": 1024, "mb": 1024**2, "gb": 1024**3, "b": 1}.get(unit)
            if scale is None:
                raise ValueError(f"unknown VmRSS unit in {line!r}")
            return int(parts[1]) * scale
    return None


def read_proc(pid: int, proc: Path = PROC) -> tuple[int, int] | None:
    """(cpu ticks, rss bytes) of one process; None if it is gone or unreadable."""
    try:
        ticks = parse_stat_cpu_ticks((proc / str(pid) / "stat").read_text())
        rss = parse_status_rss_bytes((proc / str(pid) / "status").read_text())
    except (OSError, ValueError):
        return None
    return ticks, rss or 0


# -- a pod's peak memory and mean CPU over its life --------------------------------------------


def parse_status_hwm_bytes(text: str) -> int | None:
    """VmHWM (the process's peak resident set) from `/proc/<pid>/status`, in bytes."""
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return parse_status_rss_bytes("VmRSS:" + line[len("VmHWM:") :])
    return None


def parse_stat_total_ticks(text: str) -> int:
    """utime + stime + cutime + cstime (clock ticks): the process's CPU and that of the
    children it has reaped, so a pod's worker processes count once they exit."""
    head, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or "(" not in head or len(fields) < 15:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    return sum(int(f) for f in fields[11:15])


def _children(pid: int, proc: Path) -> list[int]:
    try:
        text = (proc / str(pid) / "task" / str(pid) / "children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def tree_usage(pid: int, proc: Path = PROC) -> tuple[int, int] | None:
    """(cpu ticks, rss bytes) of a process and its live children, now; None if it is gone."""
    main = read_proc(pid, proc)
    if main is None:
        return None
    ticks, rss = main
    for child in _children(pid, proc):
        usage = read_proc(child, proc)
        if usage is not None:
            ticks, rss = ticks + usage[0], rss + usage[1]
    return ticks, rss


def clock_ticks_per_s() -> float:
    return float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


class LifeUsage:
    """Samples one pod's main process (and its live children) now and then while it runs:
    the highest memory seen (the main process's VmHWM, or the whole tree's summed resident
    set if higher) and its CPU ticks, so that when it ends `peak_memory_gib` and `cpu_used`
    describe its whole life. A process that exits between samples loses at most the last
    `every_s` of CPU."""

    def __init__(self, every_s: float = 0.1, proc: Path = PROC) -> None:
        self.every_s, self.proc = every_s, proc
        self.peak_bytes = 0
        self.ticks = 0
        self._last = -math.inf
        self._hz = clock_ticks_per_s()

    def sample(self, pid: int, now: float | None = None) -> None:
        """Read the process tree's memory and CPU unless sampled less than `every_s` ago."""
        now = time.monotonic() if now is None else now
        if now - self._last < self.every_s:
            return
        self._last = now
        try:
            self.ticks = max(
                self.ticks, parse_stat_total_ticks((self.proc / f"{pid}/stat").read_text())
            )
            hwm = parse_status_hwm_bytes((self.proc / f"{pid}/status").read_text()) or 0
        except (OSError, ValueError):
            return  # gone (or a zombie without memory figures): keep what was seen
        tree = [pid, *_children(pid, self.proc)]
        rss = sum((read_proc(p, self.proc) or (0, 0))[1] for p in tree)
        self.peak_bytes = max(self.peak_bytes, hwm, rss)

    def peak_memory_gib(self) -> float | None:
        return self.peak_bytes / GIB if self.peak_bytes else None

    def cpu_used(self, runtime_s: float) -> float | None:
        """Mean vCPU over `runtime_s` seconds of the pod's life (None before any sample)."""
        if not self.ticks or runtime_s <= 0:
            return None
        return self.ticks / self._hz / runtime_s
