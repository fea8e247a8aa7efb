"""How operator commands print: a rich console, left-titled tables, a live-refreshed view,
and short times and durations for table cells."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.table import Table

from adapters.local.termination import Terminated


def console(piped_width: int = 200) -> Console:
    """Rich output; when piped, `piped_width` wide (default: names and messages not cut)."""
    return Console(width=None if sys.stdout.isatty() else piped_width)


def titled_table(title: str | None, columns: Iterable[str], **options: Any) -> Table:
    """A table with these columns, its title (if any) on the left."""
    return Table(*columns, title=title, title_justify="left", **options)


def live(
    render: Callable[[], RenderableType],
    once: bool,
    interval: float,
    out: Console | None = None,
    until: Callable[[], bool] | None = None,
    on_ctrl_c: str = "",
) -> None:
    """Print `render()` once, or keep it on screen refreshed every `interval` s until Ctrl-C
    or, with `until`, until `until()` is true after a render: the last screen stays. A Ctrl-C
    leaves as a KeyboardInterrupt carrying `on_ctrl_c` (what the operator should know on
    leaving: the CLI prints it after `interrupted: `); a SIGTERM stays `Terminated`."""
    out = out or console()
    if once:
        out.print(render())
        return
    try:
        with Live(render(), console=out) as view:
            while until is None or not until():
                time.sleep(interval)
                view.update(render())
    except Terminated:
        raise
    except KeyboardInterrupt:
        if not on_ctrl_c:
            raise
        raise KeyboardInterrupt(on_ctrl_c) from None


def when(stamp: datetime | None) -> str:
    """A timestamp as `MM-DD HH:MM:SS` UTC ("" if unknown)."""
    return stamp.astimezone(UTC).strftime("%m-%d %H:%M:%S") if stamp else ""


def span(seconds: float | None) -> str:
    """A duration as seconds, minutes or hours ("" if unknown)."""
    if seconds is None:
        return ""
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.1f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"
