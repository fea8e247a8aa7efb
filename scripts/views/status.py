"""Renders `pipeline status`: a header with the run's totals, its forecast (the running
layer's ETA, the run's, and their projected costs), spend against budget and the cluster, a
fixed-height table of layers (chunks, rate, ETA, cost so far and projected) that fits 100
columns, and what the waiting layers wait on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from scripts.money_format import saving, usd
from scripts.views.terminal import span
from shared.model.phase import Phase, RunStatus, canary_phase_to_doc
from shared.reconcile.bigtable_load import brief
from shared.views.progress import FORECAST, LayerProgress, RunProgress, blocking_waits, visible_rows

MAX_ROWS = 14  # layer rows; the rest is summarised in one line
MAX_WAITING = 3  # waiting layers named under the table
PHASE_STYLE = {
    Phase.SUCCEEDED: "green",
    Phase.RUNNING: "cyan",
    Phase.FAILED: "red",
    Phase.WAITING: "dim",
}
PHASE_SHORT = {
    Phase.SUCCEEDED: "done",
    Phase.RUNNING: "run",
    Phase.FAILED: "FAIL",
    Phase.WAITING: "wait",
}
COLUMNS = (
    # (header, justify): kept short so the table fits 100 columns
    ("layer", "left"),
    ("phase", "left"),
    ("chunks", "right"),
    ("%", "right"),
    ("act/rdy", "right"),
    ("retry", "right"),
    ("fail", "right"),
    ("OOM", "right"),
    ("par/ramp", "right"),
    ("appr", "left"),
    ("elapsed", "right"),
    ("/min", "right"),
    ("ETA", "right"),
    ("USD", "right"),
    ("proj", "right"),  # projected: spent plus the forecast cost of what is left
)


def count(n: int | float | None) -> str:
    """A count in at most 5 characters: 999, 12.3k, 262k, 1.2M."""
    if n is None:
        return ""
    n = float(n)
    if n < 1000:
        return f"{n:.0f}"
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1000:.0f}k" if n < 1_000_000 else f"{n / 1e6:.1f}M"


def rate(per_min: float | None) -> str:
    """Chunks per minute: one decimal under 10 (a slow top layer is not "0")."""
    if per_min is None:
        return ""
    return f"{per_min:.1f}" if per_min < 10 else count(per_min)


def _row(lp: LayerProgress) -> list[str]:
    running = lp.phase == Phase.RUNNING
    style = PHASE_STYLE.get(lp.phase, "")
    ready = "?" if lp.ready is None else str(lp.ready)
    return [
        lp.key,
        f"[{style}]{PHASE_SHORT.get(lp.phase, lp.phase)}[/]",
        f"{count(lp.chunks_done)}/{count(lp.chunks_total)}",
        "" if lp.phase == Phase.WAITING else f"{lp.percent:.0f}",
        f"{lp.active}/{ready}" if running else "",
        # "37 2h": 37 retries, 2 of them pods deleted as hung (docs/hung-workers.md)
        str(lp.retries or "") + (f" [yellow]{lp.hung}h[/]" if lp.hung else ""),
        f"[red]{lp.failed}[/]" if lp.failed else "",
        "" if not lp.oom else f"[red]{lp.oom}[/]",
        f"{lp.parallelism}/{lp.ramp_target}" if running else "",
        lp.approval,
        span(lp.elapsed_s),
        rate(lp.chunks_per_min),
        span(lp.eta_s) if lp.phase in (Phase.RUNNING, Phase.WAITING) else "",
        usd(lp.cost_usd) if lp.elapsed_s is not None else "",
        "" if lp.projected_usd is None else usd(lp.projected_usd),
    ]


def forecast_eta(p: RunProgress) -> str:
    """The first running layer's ETA and the run's, from the forecast: `ETA 12.0m
    (ingest-L3), run 41.0m` ("" without one, or once the run ended)."""
    if (
        p.eta_basis != FORECAST
        or p.eta_s is None
        or p.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)
    ):
        return ""  # (a run with failed layers has no eta_s: `failed_note` says why)
    running = next((lp for lp in p.layers if lp.phase == Phase.RUNNING), None)
    # Before any pod finished the forecast rests on an assumed chunk time: say so.
    guess = "" if p.assumed_chunk_s is None else f" (guess: {p.assumed_chunk_s:g} s/chunk)"
    if running is None or running.eta_s is None:
        return f"ETA run {span(p.eta_s)}{guess}"
    return f"ETA {span(running.eta_s)} ({running.key}), run {span(p.eta_s)}{guess}"


def failed_note(p: RunProgress, shown: int = 2) -> str:
    """What holds a run with failed layers instead of an ETA: `2 layers failed (ingest-L3,
    ingest-L4): no ETA (pipeline inspect)` ("" without any)."""
    if not p.failed_layers:
        return ""
    n = len(p.failed_layers)
    names = ", ".join(p.failed_layers[:shown]) + (", …" if n > shown else "")
    return f"{n} layer{'s' if n > 1 else ''} failed ({names}): no ETA (pipeline inspect)"


def forecast_cost(p: RunProgress) -> str:
    """Spent plus the forecast cost of what is left, for the first running layer and the
    run: `projected $0.83 (ingest-L3), $2.10 (run)` ("" without a forecast, or once the run
    ended)."""
    if p.projected_usd is None or p.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        return ""
    running = next((lp for lp in p.layers if lp.phase == Phase.RUNNING), None)
    layer = ""
    if running is not None and running.projected_usd is not None:
        layer = f"${usd(running.projected_usd)} ({running.key}), "
    return f"projected {layer}${usd(p.projected_usd)} (run)"


def header(p: RunProgress) -> Text:
    """Four lines, each under 100 characters: the run; its chunks, rate and ETA (the first
    running layer's and the run's); spend (pods and cluster fee) against budget and the
    projected cost; the cluster."""
    line1 = (
        f"run {p.run_id} · graph {p.graph_id} · {p.status} · advance {p.advance} · "
        f"elapsed {span(p.elapsed_s)}"
    )
    speed = f"{rate(p.chunks_per_min)} chunks/min" if p.chunks_per_min else "no rate yet"
    eta = f"ETA {span(p.eta_s)} at the run's average rate" if p.eta_s else "ETA ?"
    eta = failed_note(p) or forecast_eta(p) or eta
    if p.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        eta = p.status
    done = f"{count(p.chunks_done)}/{count(p.chunks_total)}"
    if p.ramp_hold:  # the rate matters less than why it is held (docs/bigtable-ramp-and-bill.md)
        speed = brief(p.ramp_hold)
    line2 = f"chunks {done} ({p.percent:.0f}%) · {speed} · {eta}"
    line3 = spend_line(p)
    if p.cluster is None:
        line4 = "cluster: not read"
    else:
        c = p.cluster
        line4 = (
            f"cluster: {c.nodes} nodes ({c.spot_nodes} Spot) under the run's pods · {c.pods} pods"
            f" requesting {c.cpu_requested:g} vCPU, {c.memory_requested_gib:g} GiB"
        )
    return Text("\n".join((line1, line2, line3, line4)))


def spend_line(p: RunProgress, width: int = 99) -> str:
    """What the run spent (an estimate): the pods' share (the table's USD column) and the
    cluster fee, against the budget, and the projection (or how it is estimated); the fee's
    label shortened where the line would not fit `width`."""
    budget = ""
    if p.budget_usd:
        share = f", {100 * p.cost_usd / p.budget_usd:.0f}%" if p.cost_usd is not None else ""
        budget = f" of ${p.budget_usd:g} budget{share}"
    tail = forecast_cost(p) or "estimate, Autopilot requests x runtime"
    if p.cost_usd is None or p.cluster_fee_usd is None:
        return f"spend ${usd(p.cost_usd)}{budget} · {tail}"
    pods, fee = usd(p.cost_usd - p.cluster_fee_usd), usd(p.cluster_fee_usd)
    line = ""
    for split in (f"pods ${pods} + cluster fee ${fee}", f"pods ${pods}, fee ${fee}"):
        line = f"spend ${usd(p.cost_usd)} ({split}){budget} · {tail}"
        if len(line) <= width:
            break
    return line


def layers_table(p: RunProgress, max_rows: int = MAX_ROWS) -> Table:
    rows, hidden = visible_rows(p.layers, max_rows)
    # No borders, one space between columns: 14 columns fit 100 characters.
    table = Table(box=None, padding=(0, 0, 0, 1), pad_edge=False, header_style="bold underline")
    for name, justify in COLUMNS:
        table.add_column(name, justify=justify, no_wrap=True, overflow="ignore")  # type: ignore[arg-type]
    for lp in rows:
        table.add_row(*_row(lp))
    # Always the same height: a blank line when nothing is hidden.
    rest = ", ".join(f"{n} {phase}" for phase, n in sorted(hidden.items()))
    table.caption = f"+ {rest} not shown" if rest else " "
    table.caption_justify = "left"
    for _ in range(max(0, min(max_rows, len(p.layers)) - len(rows))):
        table.add_row()
    return table


def waiting_lines(p: RunProgress, limit: int = MAX_WAITING) -> Text:
    """What holds the build: the front waiting layers and what each waits on (always
    `limit` + 1 lines)."""
    front, behind = blocking_waits(p.layers)
    lines = [f"{lp.key} waits on {lp.waits_on}" for lp in front[:limit]]
    more = len(front) - limit
    tail = [f"{more} more" if more > 0 else "", f"{behind} behind them" if behind else ""]
    summary = " and ".join(t for t in tail if t)
    lines = lines or ["no layer waiting"]
    lines += [""] * (limit - len(lines)) + [f"(+ {summary} waiting)" if summary else ""]
    return Text("\n".join(lines))


def canary_lines(canaries: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per canary (shared.reconcile.canary): its figures, the size it gave, its
    forecast."""
    lines = []
    for c in canaries:
        head = f"canary {c['stage']}-L{c['layer']}: {c['phase']}"
        if c["phase"] != canary_phase_to_doc(Phase.SUCCEEDED):  # canary_summary: stored names
            lines.append(head + (f" ({c['failed']})" if c.get("failed") else ""))
            continue
        peak = "?" if c["peak_memory_mib"] is None else f"{c['peak_memory_mib']:g} MiB"
        sized = c.get("sized") or {}
        line = (
            f"{head}, {c['chunks']} chunks, p50 {c['runtime_p50_s']:g} s / p95 "
            f"{c['runtime_p95_s']:g} s, peak {peak}; sized {sized.get('cpu', 0):g} vCPU / "
            f"{sized.get('memory_gib', 0):g} GiB"
        )
        if c.get("forecast_wall_s") is not None:
            line += (
                f"; forecast {span(c['forecast_wall_s'])}, {c['forecast_pods']} pods, "
                f"{usd(c['forecast_cost_usd'])}"
            )
        lines.append(line)
    return lines


def rightsize_lines(suggestions: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per right-size suggestion (shared.reconcile.rightsize): asked, suggested, used,
    saved."""
    lines = []
    for s in suggestions:
        req, sug, used = s["requested"], s["suggested"], s["used"]
        line = (
            f"right-size {s['stage']}-L{s['layer']} (from {s['basis']}): "
            f"{sug['cpu']:g} vCPU / {sug['memory_gib']:g} GiB "
            f"instead of {req['cpu']:g} / {req['memory_gib']:g}"
        )
        if used["peak_memory_gib"] is not None:
            line += f"; used p95 {used['cpu_p95']:.2f} vCPU, peak {used['peak_memory_gib']:.2f} GiB"
        if s["savings_usd"] is not None:
            line += f"; {saving(s['savings_usd'])}"
        if s["covered"] is False:
            line += " (short of the peak: would have been OOM-killed)"
        lines.append(line)
    return lines


def status_view(p: RunProgress, note: str = "", max_rows: int = MAX_ROWS) -> Group:
    """The whole screen: header, layers, waiting layers, and a note (what was not read)."""
    parts = [header(p)]
    if p.starts:  # how the run began mid-graph, unverified layers included (recorded)
        parts.append(Text("\n".join(p.starts), style="yellow"))
    parts += [layers_table(p, max_rows), waiting_lines(p)]
    if p.canaries:
        parts.append(Text("\n".join(canary_lines(p.canaries)), style="cyan"))
    if p.rightsize:
        parts.append(Text("\n".join(rightsize_lines(p.rightsize)), style="cyan"))
    if note:
        parts.append(Text(note, style="dim"))
    return Group(*parts)
