"""How operator commands print: a rich console, left-titled tables, a live-refreshed view,
and short times and durations for table cells."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import IO, Any

from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.live import Live
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from adapters.common.termination import Terminated

# How wide a renderable is measured when nothing limits it; a renderable that measures this
# wide has no width of its own (a rule, a padded block) and gets the console's.
UNBOUNDED = 100_000


def keep_words(table: Table, out: Console) -> Table:
    """`table` with each column at least as wide as its widest word or figure (its header's
    too): rich then wraps a cell by words and never cuts one. (Left alone, a table narrower
    than its content shrinks its widest columns first, below what their cells need.)"""
    options = out.options.update_width(UNBOUNDED)
    for column in table.columns:
        cells = [column.header, *column.cells]
        widest = max(Measurement.get(out, options, cell).minimum for cell in cells)
        column.min_width = max(column.min_width or 0, widest)
    return table


def min_width(table: Table, out: Console) -> int:
    """The narrowest `table` can be with every word and figure whole (`keep_words`)."""
    keep_words(table, out)
    return Measurement.get(out, out.options.update_width(UNBOUNDED), table).minimum


def plain_lines(table: Table) -> Text:
    """`table` as one line per row, `header: value` for each non-empty cell (its title
    first): what a screen too narrow for the table shows, wrapped by words."""
    lines = [Text.from_markup(str(table.title))] if table.title else []
    columns = table.columns
    for row in zip(*(column.cells for column in columns), strict=True):
        parts = [
            Text.assemble(f"{column.header}: ", _text(cell))
            for column, cell in zip(columns, row, strict=True)
            if _text(cell).plain
        ]
        lines.append(Text(" · ").join(parts))
    return Text("\n").join(lines)


def _text(cell: RenderableType) -> Text:
    return cell if isinstance(cell, Text) else Text.from_markup(str(cell))


def fit(table: Table, out: Console) -> RenderableType:
    """`table` with its cells wrapped by words where `out` is wide enough to keep every word
    whole (or is not a terminal: `Whole` widens it), else its rows as plain lines."""
    if not out.is_terminal or min_width(table, out) <= out.width:
        return keep_words(table, out)
    return plain_lines(table)


class Whole:
    """`renderable` never cut, past the console's width if it must: a table wraps its cells by
    words from the console's width up to as wide as its widest words need (`keep_words`),
    anything else is as wide as its longest line. For output that is not a terminal, where a
    long line costs nothing and a cut one reads wrong."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if isinstance(self.renderable, Table):
            need = min_width(self.renderable, console)
        else:
            unbounded = options.update_width(UNBOUNDED)
            need = Measurement.get(console, unbounded, self.renderable).maximum
            need = 0 if need >= UNBOUNDED else need
        yield from console.render(
            self.renderable, options.update_width(max(options.max_width, need))
        )


class _KeepWhole(RenderHook):
    """Every renderable a piped console prints, kept whole (`Whole`)."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [Whole(r) for r in renderables]


def console(
    piped_width: int = 200, *, stderr: bool = False, file: IO[str] | None = None
) -> Console:
    """Rich output (to stdout, `stderr`, or `file`). On a terminal, rich's as it is. Anywhere
    else (a file, a pipe) never cut: `piped_width` (or `COLUMNS`, where the environment sets
    it) wide for what fits, lines soft-wrapped
    (one line stays one line, no word is broken), tables wrapped by words in their cells and
    wider than `piped_width` where their words need it (`Whole`): nothing is cropped or
    ellipsized."""
    out = Console(stderr=stderr, file=file)
    if out.is_terminal:
        return out
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else piped_width
    out = Console(stderr=stderr, file=file, width=width, soft_wrap=True)
    out.push_render_hook(_KeepWhole())
    return out


def titled_table(title: str | None, columns: Iterable[str], **options: Any) -> Table:
    """A table with these columns, its title (if any) on the left."""
    return Table(*columns, title=title, title_justify="left", **options)


@contextmanager
def live_view(
    out: Console, first: RenderableType | None = None, **options: Any
) -> Iterator[Callable[[RenderableType], None]]:
    """A view the block updates (`update(renderable)`). On a terminal, rich's Live redraws it
    in place (`options` go to Live); anywhere else only the last view is printed, whole, as
    the block ends (a Live there prints its last frame without a line end, so the next line
    would run into it)."""
    if out.is_terminal:
        with Live(first, console=out, **options) as view:
            yield view.update
        return
    last: list[RenderableType | None] = [first]

    def update(renderable: RenderableType) -> None:
        last[0] = renderable

    try:
        yield update
    finally:
        if last[0] is not None:
            out.print(last[0])


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
        with live_view(out, render()) as update:
            while until is None or not until():
                time.sleep(interval)
                update(render())
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
