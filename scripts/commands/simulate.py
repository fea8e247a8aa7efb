"""`pipeline simulate`: plan a build before running it (time, cost, controller load).

Drives the real decision (shared.reconcile.decide.decide: ramp, gating, approvals, budget guard)
against a simulated Autopilot cluster (shared.forecast.simulation). Only reads Firestore, and only
with `--runtimes-from RUN_ID`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from shared.config.config import PipelineConfig
from shared.config.config_files import load_config
from shared.config.stage_selection import default_stages
from shared.forecast.simulation.cluster import ClusterParams
from shared.forecast.simulation.controller_cost import controller_cost
from shared.forecast.simulation.engine import T0, SimReport, SimSettings, simulate
from shared.forecast.simulation.runtimes import Runtimes, recorded_runtimes
from shared.model.state import RunState
from shared.money.bill import LOG_BYTES_PER_RECONCILE, Bill, planned_bill
from shared.money.controller_usage import ControllerUsage
from shared.money.costs import RunCost
from shared.money.pricing import load_cloud_prices
from shared.reconcile.bigtable_load import Overload, parse_overload
from shared.reconcile.build_plan import new_run


def sized(cfg: PipelineConfig, size: str | None) -> PipelineConfig:
    """The config with the dataset's volume size replaced by X,Y,Z (voxels)."""
    if not size:
        return cfg
    try:
        xyz = tuple(int(v) for v in size.split(","))
    except ValueError:
        xyz = ()
    if len(xyz) != 3 or min(xyz) <= 0:
        raise click.BadParameter(f"{size!r}: expected three positive voxel counts X,Y,Z")
    source = cfg.ds.data_source.model_copy(update={"size": xyz})
    return cfg.model_copy(
        update={"dataset_config": cfg.ds.model_copy(update={"data_source": source})}
    )


def load_recorded(source: str) -> dict[str, list[float]]:
    """Per-layer pod runtimes of a finished run: a JSON file ({layer key: [seconds, ...]}) or
    a run id read from Firestore (its pod records, else each layer's mean runtime)."""
    path = Path(source)
    if path.is_file():
        data = json.loads(path.read_text())
        return {k: [float(x) for x in v] for k, v in data.items()}
    from scripts.services import connect  # only this option needs Firestore

    store = connect().store
    run = store.load_run(source)
    pods = {
        key: [
            float(p["seconds"]) for p in store.pod_records(source, key) if p["phase"] == "Succeeded"
        ]
        for key in run.layers
    }
    return recorded_runtimes(run, pods)


def report_dict(report: SimReport, elapsed_s: float, reconcile_s: float) -> dict[str, Any]:
    """The `--json` object."""
    messages = report.function_invocations  # one Pub/Sub message per invocation
    ctl = controller_cost(
        report.function_invocations,
        report.firestore_reads,
        report.firestore_writes,
        messages,
        report.wall_s,
        reconcile_s,
    )
    return {
        "status": report.status,
        "chunks": report.chunks,
        "wall_s": round(report.wall_s, 1),
        "cost_usd": round(report.cost_usd, 4),
        "pods": report.pods,
        "function_invocations": report.function_invocations,
        "reconciles": report.reconciles,
        "firestore_reads": report.firestore_reads,
        "firestore_writes": report.firestore_writes,
        "job_events": report.job_events,
        "events_dropped": report.events_dropped,
        "events_covered": report.events_covered,
        "controller_cost": ctl.as_dict(),
        "layers": [
            {
                "layer": lr.key,
                "batches": lr.batches,
                "chunks": lr.chunks,
                "wall_s": round(lr.wall_s, 1),
                "pods": lr.pods,
                "preempted": lr.preempted,
                "failed": lr.failed,
            }
            for lr in report.layers
        ],
        "simulated_in_s": round(elapsed_s, 2),
        **({"ramp_timeline": ramp_timeline(report)} if report.ramp_timeline else {}),
        "bill": simulated_bill(report, reconcile_s).as_dict(),
    }


def simulated_bill(report: SimReport, reconcile_s: float) -> Bill:
    """The whole bill of the simulated build (shared.money.bill.planned_bill): every line
    estimated; the controller priced from the simulated counts."""
    usage = ControllerUsage(
        reconciles=report.function_invocations,
        busy_s=report.function_invocations * reconcile_s,
        reads=report.firestore_reads,
        writes=report.firestore_writes,
        messages=report.function_invocations,  # one trigger message per invocation
        log_bytes=report.function_invocations * LOG_BYTES_PER_RECONCILE,
    )
    cost = report.run_cost or RunCost()
    return planned_bill(cost, usage, report.wall_s, load_cloud_prices())


def ramp_timeline(report: SimReport) -> list[dict[str, Any]]:
    """The ramp under a simulated Bigtable overload: each change of the load, the running
    layers' parallelism or why the ramp holds."""
    return [
        {"t_s": round(t, 1), "load": load, "parallelism": p, "ramp_hold": why}
        for t, load, p, why in report.ramp_timeline
    ]


def run_simulation(
    cfg: PipelineConfig,
    settings: SimSettings,
    stages: list[str] | None = None,
) -> tuple[SimReport, RunState]:
    run = new_run(cfg, "simulated", stages or default_stages(cfg), cfg.controller.advance, T0)
    return simulate(cfg, run, settings), run


@click.command("simulate")
@click.option("-c", "--config", "config_path", required=True, type=click.Path(exists=True))
@click.option("--size", help="Volume size in voxels, X,Y,Z (default: the dataset's).")
@click.option(
    "--chunk-seconds",
    type=float,
    default=30.0,
    show_default=True,
    help="Mean compute time of one chunk (lognormal).",
)
@click.option(
    "--runtimes-from",
    "runtimes_from",
    help="A finished run id (or a JSON file of per-layer pod seconds) to draw runtimes from.",
)
@click.option(
    "--preemptions-per-hour",
    type=float,
    default=0.0,
    show_default=True,
    help="Spot preemptions per running pod per hour.",
)
@click.option(
    "--failure-rate",
    type=float,
    default=0.0,
    show_default=True,
    help="Transient failures per pod attempt (each uses a retry).",
)
@click.option(
    "--node-startup-s",
    type=float,
    default=60.0,
    show_default=True,
    help="Autopilot node provisioning for a pod no warm node can hold.",
)
@click.option(
    "--reconcile-s",
    type=float,
    default=0.5,
    show_default=True,
    help="One reconcile's wall time, for the controller's cost.",
)
@click.option(
    "--bigtable-overload",
    "overload",
    multiple=True,
    help="A busy Bigtable: START-END:LOAD (seconds after the start, load 0..1), e.g. "
    "600-1800:0.8, repeatable; prints the ramp's timeline (docs/bigtable-ramp-and-bill.md).",
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def simulate_cmd(
    config_path,
    size,
    chunk_seconds,
    runtimes_from,
    preemptions_per_hour,
    failure_rate,
    node_startup_s,
    reconcile_s,
    overload,
    seed,
    as_json,
) -> None:
    """Simulate a whole build: wall time, cost, pods and controller load."""
    cfg = sized(load_config(config_path), size)
    recorded = load_recorded(runtimes_from) if runtimes_from else {}
    settings = SimSettings(
        cluster=ClusterParams(
            node_startup_s=node_startup_s,
            preemptions_per_hour=preemptions_per_hour,
            failure_rate=failure_rate,
        ),
        runtimes=Runtimes(chunk_seconds=chunk_seconds, recorded=recorded),
        seed=seed,
        bigtable_overload=_overload(overload),
    )
    started = time.monotonic()
    report, _ = run_simulation(cfg, settings)
    out = report_dict(report, time.monotonic() - started, reconcile_s)
    if as_json:
        click.echo(json.dumps(out))
        return
    click.echo(
        f"{out['status']}: {out['chunks']:,} chunks in {out['wall_s'] / 3600:.2f} h, "
        f"${out['cost_usd']:,.2f} on Autopilot, {out['pods']:,} pods"
    )
    click.echo(
        f"controller: {out['function_invocations']:,} invocations, "
        f"{out['firestore_reads']:,} reads, {out['firestore_writes']:,} writes, "
        f"{out['job_events']:,} Job events ({out['events_dropped']:,} rate-limited, "
        f"{out['events_covered']:,} coalesced); ${out['controller_cost']['build_usd']:.2f} "
        f"this build, ${out['controller_cost']['monthly_usd']:.2f}/month back to back"
    )
    for lr in out["layers"]:
        click.echo(
            f"  {lr['layer']:<12} {lr['batches']:>8,} batches {lr['wall_s'] / 60:>8.1f} min "
            f"{lr['pods']:>8,} pods ({lr['preempted']} preempted, {lr['failed']} failed)"
        )
    bill = out["bill"]
    lines = ", ".join(f"{k} ${v['usd']:.4f}" for k, v in bill.items() if k != "total_usd")
    click.echo(f"whole bill (estimated): ${bill['total_usd']:.4f} ({lines})")
    if "ramp_timeline" in out:
        click.echo("ramp under the Bigtable overload (each change):")
        for e in out["ramp_timeline"]:
            load = "-" if e["load"] is None else f"{e['load']:.0%}"
            click.echo(
                f"  {e['t_s'] / 60:>7.1f} min  load {load:>4}  parallelism {e['parallelism']:>6,}"
                f"  {e['ramp_hold'] or 'ramp free'}"
            )


def _overload(texts: tuple[str, ...]) -> tuple[Overload, ...]:
    try:
        return tuple(parse_overload(text) for text in texts)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bigtable-overload") from None


COMMANDS = (simulate_cmd,)
