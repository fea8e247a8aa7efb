"""`pipeline run RUN --timeline`: where a build's wall time went, layer by layer, and the
run's wall time as the sum of its named parts and the unnamed rest
(`shared.views.build_timeline`)."""

from __future__ import annotations

from rich.table import Table

from scripts.views.terminal import titled_table
from shared.views.build_timeline import BuildTimeline
from shared.views.wall_parts import UNNAMED, Part

COLUMNS: tuple[Part, ...] = (
    Part.SETUP,
    Part.APPROVAL_WAIT,
    Part.ADVANCE,
    Part.STARTUP,
    Part.PROCESS_START,
    Part.COMPUTE,
    Part.TAIL,
    Part.COMPLETION,
)


def _s(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds else "·"


def timeline_table(run_id: str, tl: BuildTimeline) -> Table:
    """One row per layer (its own spans, seconds; layers overlap where stages run side by
    side), then the run's parts: each second of wall time counted once, `unnamed` the rest."""
    table = titled_table(
        f"run {run_id} · where the wall time went (s)",
        ("layer", "pods", *(p.value.replace("_", " ") for p in COLUMNS), "pods created -> running"),
    )
    for lt in tl.layers:
        startup = lt.pod_startup_median_s
        table.add_row(
            lt.key,
            str(lt.pods) if lt.pods else "",
            *(_s(lt.seconds(p)) for p in COLUMNS),
            "" if startup is None else f"median {startup:.1f}",
        )
    table.add_row(
        "[bold]wall[/]",
        "",
        *(f"[bold]{_s(tl.parts.get(p.value, 0.0))}[/]" for p in COLUMNS),
        "",
        end_section=True,
    )
    unnamed = tl.parts.get(UNNAMED, 0.0)
    where = "; ".join(g.describe() for g in tl.unnamed[:5])
    table.caption = f"wall {tl.wall_s:.1f} s = the parts above + {unnamed:.1f} s unnamed" + (
        f" (longest: {where})" if where else ""
    )
    table.caption_justify = "left"
    return table
