"""`pipeline costs` and `runs`: what a run spent, and every recorded run
(docs/architecture.md#what-the-predecessor-offered).

Costs are estimates priced now from the rate table for the run's region (Autopilot bills
requests x runtime). They only READ Firestore."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
from rich.table import Table

from scripts.bill_read import default_monitor, run_bill
from scripts.cost_report import cost_report
from scripts.layer_target import run_config
from scripts.money_format import usd
from scripts.services import Services, connect
from scripts.views.bill_table import bill_table
from scripts.views.terminal import console, titled_table
from shared.model.phase import Phase
from shared.model.state import RunState
from shared.money.costs import estimate
from shared.money.pricing import load_rates
from shared.ports.run_store import RunNotFoundError


def _pricing_label(report: dict[str, Any]) -> str:
    models = set(report["provisioning"].values())
    model = models.pop() if len(models) == 1 else "Spot/on-demand by stage"
    classes = sorted(set(report["compute_class"].values()) - {"general-purpose"})
    return ", ".join(["estimate", model, report["region"], *classes])


COST_COLUMNS = (
    "stage",
    "layer",
    "phase",
    "pods",
    "retries",
    "vCPU-h",
    "GiB-h",
    "cost USD",
    "backfilled",
)


def _sum_row(label: str, amount: str, phase: str = "") -> list[str]:
    """A subtotal or total: a label, an amount in the cost column, the other cells blank."""
    return [label, "", phase, "", "", "", "", amount, ""]


def costs_table(report: dict[str, Any]) -> Table:
    table = titled_table(f"run {report['run_id']} · {_pricing_label(report)}", COST_COLUMNS)
    rows = report["layers"]
    for stage, stage_usd in report["stages"].items():
        for r in (r for r in rows if r["stage"] == stage):
            table.add_row(
                stage,
                str(r["layer"]),
                r["phase"],
                str(r["pods"]),
                str(r["retries"]),
                f"{r['vcpu_hours']:.3f}",
                f"{r['gib_hours']:.3f}",
                usd(r["usd"]),
                str(r["backfilled_pods"] or ""),
            )
        subtotal = _sum_row(f"[bold]{stage}[/]", f"[bold]{usd(stage_usd)}[/]", "subtotal")
        table.add_row(*subtotal, end_section=True)
    table.add_row(*_sum_row("cluster fee", usd(report["cluster_fee_usd"])))
    table.add_row(*_sum_row("[bold]total[/]", f"[bold]{usd(report['total_usd'])}[/]"))
    table.caption = (
        "vCPU-h and GiB-h are the recorded pods' requests x runtime; backfilled pods "
        "(finished unseen) are priced at the layer's mean runtime"
    )
    table.caption_justify = "left"
    return table


def _run_cost(run: RunState, now: datetime) -> str:
    try:
        return usd(estimate(run_config(run), run, load_rates(), now).usd)
    except ValueError as e:  # an old snapshot, a region the rate table lacks
        return f"? ({str(e).splitlines()[0][:40]})"


def runs_table(services: Services, graph: str | None, now: datetime) -> Table:
    table = titled_table(
        "runs, newest first (cost: estimate, priced now)",
        ("run", "graph", "status", "stages", "layers done", "created", "cost USD"),
    )
    for summary in services.store.list_runs():
        if graph and summary.graph_id != graph:
            continue
        try:
            run = services.store.load_run(summary.run_id)
        except RunNotFoundError:  # purged meanwhile
            continue
        done = sum(ls.phase == Phase.SUCCEEDED for ls in run.layers.values())
        created = f"{run.created_at:%Y-%m-%d %H:%M}" if run.created_at else ""
        table.add_row(
            run.run_id,
            run.graph_id,
            run.status,
            ",".join(run.stages),
            f"{done}/{len(run.layers)}",
            created,
            _run_cost(run, now),
        )
    return table


@click.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def costs(run_id: str, as_json: bool) -> None:
    """A run's estimated spend by stage and layer, the cluster fee and the total, priced
    now from the rate table for the run's region (Autopilot bills requests x runtime)."""
    now = datetime.now(UTC)
    run = connect().store.load_run(run_id)
    report = cost_report(run, now)
    # Beside the pods: Bigtable storage and nodes, the controller (docs/bigtable-ramp-and-bill.md).
    bill = run_bill(run_config(run), run, now, default_monitor())
    report["bill"] = bill.as_dict()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        console().print(costs_table(report))
        console().print(bill_table(run_id, bill))


@click.command()
@click.option("--graph", default=None, help="Only runs of this graph id.")
def runs(graph: str | None) -> None:
    """Every recorded run, newest first, with its estimated cost."""
    console().print(runs_table(connect(), graph, datetime.now(UTC)))


COMMANDS = (costs, runs)
