"""Renders `pipeline top`'s fleet view: one fixed-height screen at any number of pods."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group
from rich.table import Table
from rich.text import Text

from scripts.views.terminal import when
from shared.ports.cluster import PodInfo
from shared.views.fleet import FleetSummary, PodSample, Spread

BANDS = 3  # pods per band (highest, middle, lowest)


def _pct(share: float | None) -> str:
    if share is None:
        return ""
    text = f"{100 * share:.0f}%"
    return f"[red]{text}[/]" if share > 0.9 else text


def _spread_row(name: str, s: Spread | None) -> list[str]:
    if s is None:
        return [name, "", "", "", "", "", ""]
    hot = f"[red]{s.over_90}[/]" if s.over_90 else "0"
    return [name, *(_pct(v) for v in (s.p10, s.p50, s.p90, s.p99, s.max)), hot]


def spreads_table(summary: FleetSummary) -> Table:
    table = Table("usage / request", "p10", "p50", "p90", "p99", "max", "pods > 90%",
                  box=None, padding=(0, 2, 0, 0), header_style="bold underline")  # fmt: skip
    table.add_row(*_spread_row("CPU", summary.cpu))
    table.add_row(*_spread_row("memory", summary.memory))
    return table


def bands_table(summary: FleetSummary) -> Table:
    """The highest, middle and lowest pods by memory share (then CPU), BANDS rows each."""
    table = Table("band", "index", "pod", "CPU", "CPU %", "mem GiB", "mem %",
                  box=None, padding=(0, 2, 0, 0), header_style="bold underline")  # fmt: skip
    for label, pods in (
        ("highest", summary.highest),
        ("middle", summary.middle),
        ("lowest", summary.lowest),
    ):
        rows: list[PodSample | None] = [*pods, *([None] * (BANDS - len(pods)))]
        for i, pod in enumerate(rows):
            name = label if i == 0 else ""
            if pod is None:
                table.add_row(name, "", "", "", "", "", "")
                continue
            table.add_row(
                name, str(pod.index), pod.name, f"{pod.cpu:.2f}", _pct(pod.cpu_share),
                f"{pod.memory_gib:.2f}", _pct(pod.memory_share),
            )  # fmt: skip
    return table


def fleet_view(
    job: str, summary: FleetSummary, pods: list[PodInfo], note: str, now: datetime
) -> Group:
    """Header (pods by phase, OOM kills), percentiles, bands, a note: the same height always."""
    phases: dict[str, int] = {}
    for p in pods:
        phases[p.phase] = phases.get(p.phase, 0) + 1
    counts = " · ".join(f"{n} {ph.lower()}" for ph, n in sorted(phases.items())) or "no pods"
    oom = f"[red]{summary.oom_kills} OOM kills[/]" if summary.oom_kills else "0 OOM kills"
    requests = sorted(
        {
            f"{p.cpu_request:g} vCPU, {p.memory_request_gib:g} GiB"
            for p in pods
            if p.phase == "Running"
        }
    )
    head = Text.from_markup(
        f"job {job} · {when(now)} UTC\n{counts} · {summary.pods} with a usage sample · {oom}\n"
        f"request per pod: {' | '.join(requests) or '-'} (shares below are usage / request)",
        overflow="ellipsis",
    )
    return Group(
        head,
        Text(""),
        spreads_table(summary),
        Text(""),
        bands_table(summary),
        Text(note or " ", style="dim"),
    )
