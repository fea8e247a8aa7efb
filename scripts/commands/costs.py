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

from scripts.bill_read import bill_table, default_monitor, run_bill
from scripts.layer_target import run_config
from scripts.services import Services, connect
from scripts.views.money import usd
from scripts.views.terminal import console, titled_table
from shared.config.config import PipelineConfig
from shared.jobs.setup_job import setup_requests
from shared.model.phase import Phase
from shared.model.state import LayerState, RunState, SetupState
from shared.money.costs import LayerCost, estimate
from shared.money.pricing import load_rates
from shared.ports.run_store import RunNotFoundError

SETUP = "setup"  # a setup pass's "layer" in rows and tables (`pipeline submit` takes 0)


def _setup_row(
    cfg: PipelineConfig, setup: SetupState, lc: LayerCost, now: datetime
) -> dict[str, Any]:
    """A setup pass's row: one pod at the setup's requests over its Jobs' spans."""
    req = setup_requests(cfg.job.for_stage(setup.stage).compute_class)
    hours = setup.span_s(now) / 3600
    return {
        "stage": setup.stage,
        "layer": SETUP,
        "key": lc.key,
        "phase": setup.phase,
        "pods": setup.attempt + 1,
        "retries": setup.attempt,
        "preempted": 0,
        "vcpu_hours": req.cpu * hours,
        "gib_hours": req.memory_gib * hours,
        "usd": lc.usd,
        "backfilled_pods": 0,
    }


def _layer_row(ls: LayerState, lc: LayerCost) -> dict[str, Any]:
    return {
        "stage": ls.stage,
        "layer": ls.layer,
        "key": ls.key,
        "phase": ls.phase,
        "pods": ls.pods.succeeded + ls.pods.failed + ls.pods.preempted,
        "retries": ls.pods.failed,
        "preempted": ls.pods.preempted,
        "vcpu_hours": (ls.pods.cpu_seconds + ls.pods.running_cpu_seconds) / 3600,
        "gib_hours": (ls.pods.memory_gib_seconds + ls.pods.running_memory_gib_seconds) / 3600,
        "usd": lc.usd,
        "backfilled_pods": lc.backfilled_pods,
    }


def cost_report(run: RunState, now: datetime) -> dict[str, Any]:
    """A run's estimated cost by layer and stage, the cluster fee and the total (JSON-ready).
    Rows in build order: each stage's setup pass (`"layer": "setup"`) before its layers;
    passes never started spent nothing and have no row."""
    cfg = run_config(run)
    est = estimate(cfg, run, load_rates(), now)
    by_key = {lc.key: lc for lc in est.layers}
    layers: list[dict[str, Any]] = []
    for stage in run.stages:
        setup = run.setups.get(stage)
        if setup is not None and f"{stage}-{SETUP}" in by_key:
            layers.append(_setup_row(cfg, setup, by_key[f"{stage}-{SETUP}"], now))
        for ls in (ls for ls in run.ordered_layers() if ls.stage == stage):
            if ls.key in by_key:
                layers.append(_layer_row(ls, by_key[ls.key]))
    stages: dict[str, float] = {}
    for row in layers:
        stages[row["stage"]] = stages.get(row["stage"], 0.0) + row["usd"]
    models = {s: ("Spot" if cfg.job.for_stage(s).spot else "on-demand") for s in run.stages}
    classes = {s: cfg.job.for_stage(s).compute_class or "general-purpose" for s in run.stages}
    return {
        "run_id": run.run_id,
        "graph_id": run.graph_id,
        "status": run.status,
        "estimate": True,
        "region": cfg.region,
        "priced_at": now.isoformat(),
        "provisioning": models,
        "compute_class": classes,
        "layers": layers,
        "stages": stages,
        "cluster_fee_usd": est.cluster_fee_usd,
        "total_usd": est.usd,
    }


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
