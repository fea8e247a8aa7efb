"""`pipeline alerts [RUN] [--follow] [--kind K] [--json]`: a run's alerts from its outbox
(Firestore, so nothing depends on a subscription's retention), newest last, one line each
with its severity, what happened and the fix; --follow prints new ones as they are raised
(like `kubectl get -w`) and ends with the run. Lines are shared.control.alert_lines'."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from scripts.options import JSON_OPTION, interval_option
from scripts.services import connect
from scripts.views.terminal import console, when
from shared.control.alert_lines import AlertLine, alert_lines, unseen
from shared.control.alert_severity import SEVERITIES, Severity
from shared.model.state import RUN_ENDED

STYLES = {Severity.PAGE: "bold red", Severity.NOTIFY: "yellow", Severity.INFORM: "dim"}


class NoRunError(LookupError):
    """`pipeline alerts` without RUN on a project with no run."""


def alert_text(line: AlertLine) -> Text:
    """`MM-DD HH:MM:SS  page    layer_failed run r1 ...  ->  pipeline inspect r1 ingest 2`."""
    text = Text(f"{when(line.at)}  ")
    text.append(f"{line.severity.value:<6}", style=STYLES[line.severity])
    text.append(f"  {line.summary}")
    if not line.sent:
        text.append(" (not yet published)", style="dim")
    text.append("  ->  ")
    text.append(line.fix, style="bold")
    return text


def _latest_run(store: Any) -> str:
    runs = store.list_runs()  # newest first
    if not runs:
        raise NoRunError("no runs in this project: `pipeline start` one, or name RUN")
    return runs[0].run_id


def follow(
    read: Callable[[], list[AlertLine]],
    ended: Callable[[], bool],
    show: Callable[[AlertLine], None],
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Show the alerts `read` returns, then the new ones every `interval` s until `ended()`
    (read once more after it, so the run's last alerts are shown); the number shown. The
    run's end is read before its alerts: an alert committed with the end is never missed."""
    seen: set[str] = set()
    shown = 0
    while True:
        over = ended()
        for line in unseen(read(), seen):
            show(line)
            shown += 1
        if over:
            return shown
        sleep(interval)


@click.command()
@click.argument("run_id", required=False)
@click.option(
    "-f", "--follow", "following", is_flag=True, help="Print new alerts until the run ends."
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(sorted(SEVERITIES)),
    help="Only alerts of this kind (repeatable).",
)
@interval_option(5.0)
@JSON_OPTION
def alerts(
    run_id: str | None, following: bool, kinds: tuple[str, ...], interval: float, as_json: bool
) -> None:
    """A run's alerts (default: the newest run), newest last, each with its fix; --follow
    prints new ones as they come and ends with the run. --json: one JSON object a line."""
    store = connect().store
    run_id = run_id or _latest_run(store)
    store.load_run(run_id)  # an unknown run fails here, with its name
    out: Console = console(200)

    def read() -> list[AlertLine]:
        return alert_lines(store.all_alerts(run_id), frozenset(kinds))

    def show(line: AlertLine) -> None:
        if as_json:
            click.echo(json.dumps(line.as_json()))
        else:
            out.print(alert_text(line))

    if not following:
        lines = read()
        for line in lines:
            show(line)
        if not lines and not as_json:
            out.print(
                f"no alerts for run {run_id}" + (f" of kind {', '.join(kinds)}" if kinds else "")
            )
        return
    try:
        follow(read, lambda: store.load_run(run_id).status in RUN_ENDED, show, interval)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"the build goes on; `pipeline alerts {run_id} -f` comes back to it"
        ) from None


COMMANDS = (alerts,)
