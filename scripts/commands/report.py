"""`pipeline report RUN -o FILE.html`: a run as one self-contained HTML page (timeline of
every pod attempt, parallelism against the ramp, chunks over time, cost, failed indexes)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from scripts.services import connect
from shared.model.state import RunState


def write_report(store: Any, run: RunState, path: Path) -> int:
    """Render the report of `run` to `path`; returns its size in bytes."""
    from scripts.report_data import collect
    from scripts.views.report import render_html

    text = render_html(collect(store, run, datetime.now(UTC)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return len(text.encode())


@click.command()
@click.argument("run_id")
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Default: report-RUN.html.",
)
def report(run_id: str, output: Path | None) -> None:
    """Write a run's report: one HTML file that opens offline (plotly inlined)."""
    from scripts.views.report import ReportUnavailableError

    store = connect().store
    path = output or Path(f"report-{run_id}.html")
    try:
        size = write_report(store, store.load_run(run_id), path)
    except ReportUnavailableError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {path} ({size / 1e6:.1f} MB): open it in a browser")


COMMANDS = (report,)
