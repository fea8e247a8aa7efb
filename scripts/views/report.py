"""`pipeline report`: one self-contained HTML file of a run, drawn with plotly.

Plotly because its charts are interactive (zoom into one layer's hour, hover a pod for its
index, exit code and reason) and its whole JS bundle can be inlined once
(`include_plotlyjs=True`, about 4.6 MB), so the file opens offline with no fetch; the other
charts reuse that bundle. Attempts are drawn as one line trace per outcome (not one shape per
pod), so a run of many thousand pods stays light. Needs the `report` extra.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from scripts.money_format import saving, usd
from scripts.report_data import ReportData
from scripts.views.timeline import COLUMNS

COLOURS = {
    "succeeded": "#2e7d32",
    "running": "#1e88e5",
    "failed": "#c62828",
    "preempted": "#ef6c00",
    "oom": "#6a1b9a",
}
LAYOUT: dict[str, Any] = dict(
    template="plotly_white",
    # The title on top, the legend on its own line under it: they must not overlap.
    margin=dict(l=90, r=20, t=90, b=40),
    legend=dict(orientation="h", y=1.01, x=0, yanchor="bottom"),
    font=dict(size=12),
)
MISSING = "plotly is not installed: pip install 'cave-pipeline[report]'"


class ReportUnavailableError(RuntimeError):
    """The plotting library is missing (the message names the extra to install)."""


def _go() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError as e:
        raise ReportUnavailableError(MISSING) from e
    return go


def timeline(data: ReportData) -> Any:
    """Every pod attempt as a bar from start to end, one row per index, grouped by layer;
    preemptions and OOM kills marked at their end."""
    go = _go()
    rows: dict[tuple[str, int], int] = {}
    order = [ls.key for ls in data.run.ordered_layers()]
    ticks: list[tuple[float, str]] = []
    y = 0
    for key in order:
        indexes = sorted({a.index for a in data.attempts if a.layer == key})
        if not indexes:
            continue
        first = y
        for index in indexes:
            rows[(key, index)] = y
            y += 1
        ticks.append(((first + y - 1) / 2, key))
        y += 2  # a gap between layers
    fig = go.Figure()
    for outcome, colour in COLOURS.items():
        xs: list[Any] = []
        ys: list[Any] = []
        text: list[Any] = []
        for a in data.attempts:
            if a.outcome != outcome:
                continue
            row = rows[(a.layer, a.index)]
            label = f"{a.layer} index {a.index}<br>{a.pod}<br>{outcome}"
            if a.exit_code is not None:
                label += f", exit {a.exit_code}"
            xs += [a.start, a.end, None]
            ys += [row, row, None]
            text += [label, label, None]
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs, y=ys, text=text, mode="lines", name=outcome, hoverinfo="text+x",
                    line=dict(color=colour, width=_bar_width(y)),
                )
            )  # fmt: skip
    for outcome, symbol in (("preempted", "x"), ("oom", "diamond")):
        marks = [a for a in data.attempts if a.outcome == outcome]
        if marks:
            fig.add_trace(
                go.Scatter(
                    x=[a.end for a in marks],
                    y=[rows[(a.layer, a.index)] for a in marks],
                    mode="markers",
                    name=f"{outcome} (end)",
                    marker=dict(symbol=symbol, size=9, color=COLOURS[outcome]),
                    hoverinfo="skip",
                )
            )
    fig.update_layout(
        **LAYOUT,
        title="Pod attempts by layer (one row per index; colour = outcome)",
        showlegend=True,  # even with one outcome: the colour must say what it means
        height=_timeline_height(y),
        yaxis=dict(
            tickvals=[t for t, _ in ticks], ticktext=[k for _, k in ticks],
            autorange="reversed", showgrid=False, zeroline=False,
        ),
        xaxis=dict(title="time (UTC)"),
    )  # fmt: skip
    return fig


def _timeline_height(rows: int) -> int:
    return min(900, max(320, 160 + 10 * rows))


def _bar_width(rows: int) -> float:
    """Thick bars for a few indexes, hairlines for thousands: 70 % of a row, so bars of
    neighbouring indexes do not touch."""
    per_row = (_timeline_height(rows) - 160) / max(rows, 1)
    return max(1.0, min(8.0, 0.7 * per_row))


def parallelism(data: ReportData) -> Any:
    go = _go()
    fig = go.Figure()
    if data.running:
        xs, ys = zip(*data.running, strict=True)
        fig.add_trace(go.Scatter(x=xs, y=ys, name="pods running", mode="lines", line_shape="hv"))
    if data.allowed:
        xs, ys = zip(*data.allowed, strict=True)
        fig.add_trace(
            go.Scatter(
                x=xs, y=ys, name="ramp allows (running layers)", mode="lines", line_shape="hv",
                line=dict(dash="dash", color="#9e9e9e"),
            )
        )  # fmt: skip
    fig.update_layout(
        **LAYOUT, title="Parallelism over time against the ramp", height=330,
        yaxis=dict(title="pods", rangemode="tozero"), xaxis=dict(title="time (UTC)"),
    )  # fmt: skip
    return fig


def chunks_done(data: ReportData) -> Any:
    go = _go()
    fig = go.Figure()
    for key, series in data.chunks.items():
        total = data.sizes[key].chunks
        # From 0 at the layer's first attempt, so a one-chunk layer still draws a step.
        first = min(a.start for a in data.attempts if a.layer == key)
        xs, ys = zip(*[(first, 0), *series], strict=True)
        fig.add_trace(
            go.Scatter(
                x=xs, y=[100 * v / total for v in ys], name=key, mode="lines",
                line_shape="hv", customdata=ys,
                hovertemplate=f"{key}: %{{customdata}} of {total} chunks (%{{y:.0f}}%)"
                "<extra></extra>",
            )
        )  # fmt: skip
    fig.update_layout(
        **LAYOUT, title="Chunks done over time, per layer (% of the layer)", height=330,
        yaxis=dict(title="% of the layer's chunks", range=[0, 105]),
        xaxis=dict(title="time (UTC)"),
    )  # fmt: skip
    return fig


def costs(data: ReportData) -> Any | None:
    if data.costs is None or not data.costs["layers"]:
        return None
    go = _go()
    fig = go.Figure()
    for stage in data.costs["stages"]:
        rows = [r for r in data.costs["layers"] if r["stage"] == stage]
        fig.add_trace(
            go.Bar(
                x=[r["key"] for r in rows], y=[r["usd"] for r in rows], name=stage,
                customdata=[[r["vcpu_hours"], r["gib_hours"], r["pods"]] for r in rows],
                hovertemplate="%{x}: $%{y:.4f}<br>%{customdata[0]:.3f} vCPU-h, "
                "%{customdata[1]:.3f} GiB-h, %{customdata[2]} pods<extra></extra>",
            )
        )  # fmt: skip
    fee = data.costs["cluster_fee_usd"]
    fig.update_layout(
        **LAYOUT, height=330,
        yaxis=dict(title="USD (estimate)", tickprefix="$", tickformat=_money_format(data)),
        title=f"Cost by stage and layer (total ${usd(data.costs['total_usd'])}, "
        f"of which cluster fee ${usd(fee)}, not in the bars)",
    )  # fmt: skip
    return fig


def wall_parts(data: ReportData) -> Any | None:
    """Where the wall time went: each layer's named spans on the run's clock (stacked
    bars starting where each span starts), the run's sums in the title."""
    tl = data.wall_parts
    if tl is None or not tl.layers:
        return None
    go = _go()
    fig = go.Figure()
    for part in COLUMNS:
        spans = [(lt.key, s) for lt in tl.layers for s in lt.spans if s.part is part]
        if not spans:
            continue
        fig.add_trace(
            go.Bar(
                y=[key for key, _ in spans], x=[s.end - s.start for _, s in spans],
                base=[s.start for _, s in spans], orientation="h", name=part.value,
                hovertemplate="%{y} " + part.value + ": %{x:.1f} s<extra></extra>",
            )
        )  # fmt: skip
    sums = ", ".join(f"{k} {v:.1f}" for k, v in tl.parts.items() if v)
    fig.update_layout(
        **LAYOUT, height=120 + 28 * len(tl.layers), barmode="overlay",
        xaxis=dict(title="seconds since the run was created"),
        yaxis=dict(autorange="reversed"),
        title=f"Where the wall time went ({tl.wall_s:.1f} s: {sums} s)",
    )  # fmt: skip
    return fig


def _money_format(data: ReportData) -> str:
    """Enough decimals that the axis ticks of a small demo run are not all "$0"."""
    top = max((r["usd"] for r in (data.costs or {}).get("layers", [])), default=0.0)
    decimals = 2 if top >= 1 else max(2, 2 - math.floor(math.log10(top))) if top > 0 else 2
    return f".{decimals}~f"


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def failed_section(data: ReportData) -> str:
    if not data.failed_total:
        return "<h2>Failed indexes</h2><p>None.</p>"
    rows = [
        (f.layer, f.index, f.chunks, f.first_chunk, f.attempts, f.last_reason) for f in data.failed
    ]
    more = data.failed_total - len(rows)
    note = f"<p>… and {more} more (`pipeline inspect`).</p>" if more > 0 else ""
    table = _table(("layer", "index", "chunks", "first chunk", "attempts", "last attempt"), rows)
    return f"<h2>Failed indexes ({data.failed_total})</h2>{table}{note}"


def canary_section(data: ReportData) -> str:
    """The canaries: their figures and forecast against what the run measured."""
    if not data.canaries:
        return ""
    wall = data.facts.get("wall time", "")
    cost = data.facts.get("cost (estimate)", "")
    rows = [
        (
            f"{c['stage']}-L{c['layer']}",
            c["phase"],
            c["chunks"],
            f"{c['runtime_p50_s']} / {c['runtime_p95_s']}",
            c["peak_memory_mib"],
            _requests(c.get("planned")),
            _requests(c.get("sized")),
            f"{c['forecast_wall_s']} s, {c['forecast_pods']} pods, ${c['forecast_cost_usd']}",
            f"{wall}, {cost}",
        )
        for c in data.canaries
    ]
    heads = ("layer", "canary", "chunks", "runtime p50 / p95 (s)", "peak MiB", "planned",
             "sized", "forecast (build)", "measured (build)")  # fmt: skip
    return f"<h2>Canary</h2>{_table(heads, rows)}"


def _requests(req: dict[str, float] | None) -> str:
    return "" if not req else f"{req['cpu']:g} vCPU / {req['memory_gib']:g} GiB"


def rightsize_section(data: ReportData) -> str:
    """Right-size suggestions per layer against what its pods used."""
    if not data.rightsize:
        return ""
    rows = [
        (
            f"{s['stage']}-L{s['layer']}",
            s["basis"],
            _requests(s["requested"]),
            _requests(s["suggested"]) + (" (applied)" if s.get("applied") else ""),
            "" if s["used"]["cpu_p95"] is None else f"{s['used']['cpu_p95']:.2f}",
            "" if s["used"]["peak_memory_gib"] is None else f"{s['used']['peak_memory_gib']:.3f}",
            "" if s["savings_usd"] is None else saving(s["savings_usd"]),
            {True: "yes", False: "NO", None: ""}[s["covered"]],
        )
        for s in data.rightsize
    ]
    heads = ("layer", "from", "requested", "suggested", "used CPU p95", "used peak GiB",
             "cost", "holds peak")  # fmt: skip
    return f"<h2>Right-sized requests</h2>{_table(heads, rows)}"


CSS = """
body { font-family: system-ui, sans-serif; margin: 24px 32px; color: #212121; max-width: 1280px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border-bottom: 1px solid #e0e0e0; padding: 3px 12px 3px 0; text-align: left; }
th { color: #616161; font-weight: 600; }
.facts td:first-child { color: #616161; }
.chart { margin-top: 12px; }
"""


def render_html(data: ReportData) -> str:
    """The report as one HTML document (plotly's JS inlined once)."""
    figures = [timeline(data), wall_parts(data), parallelism(data), chunks_done(data), costs(data)]
    charts = []
    first = True
    for fig in figures:
        if fig is None:
            continue
        charts.append(
            '<div class="chart">'
            + fig.to_html(full_html=False, include_plotlyjs=first, config={"displaylogo": False})
            + "</div>"
        )
        first = False
    facts = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
        for k, v in data.facts.items()
    )
    title = f"cave-pipeline run {data.run.run_id}"
    # Titles sit at the top left, above the legend line.
    for fig in figures:
        if fig is not None:
            fig.update_layout(title=dict(y=0.98, yanchor="top", x=0.01, xanchor="left"))
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>Generated {_stamp(data.now)}. Costs are estimates (Autopilot requests × runtime).</p>"
        f"<table class='facts'>{facts}</table>{''.join(charts)}{failed_section(data)}"
        f"{canary_section(data)}{rightsize_section(data)}"
        "</body></html>"
    )


def _stamp(t: datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S} UTC"
