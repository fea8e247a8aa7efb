"""The whole bill of a run as a terminal table (`pipeline costs --bill`, `pipeline run`)."""

from __future__ import annotations

from typing import Any

from scripts.money_format import usd
from scripts.views.terminal import titled_table
from shared.money.bill import Bill


def bill_table(run_id: str, bill: Bill, projected: Bill | None = None) -> Any:
    """The whole bill as a table: line, USD, measured or estimated, and what it rests on."""
    table = titled_table(f"run {run_id} · the whole bill", ("line", "USD", "how", "basis"))
    for line in bill.lines:
        how = "measured" if line.measured else "estimated"
        table.add_row(line.key, usd(line.usd), how, line.basis)
    table.add_row("[bold]total[/]", f"[bold]{usd(bill.total_usd)}[/]", "", "")
    if projected is not None:
        lines = ", ".join(f"{line.key} ${usd(line.usd)}" for line in projected.lines)
        table.caption = f"forecast at the end: ${usd(projected.total_usd)} ({lines})"
        table.caption_justify = "left"
    return table
