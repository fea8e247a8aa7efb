"""`pipeline demo`: the demo build on the local stack, with live progress and a verdict (and
`--report` its HTML report); `pipeline demo data DIR`: the demo's volume and config pair, for
a build by hand (docs/cli.md#running-a-build-on-the-local-stack-by-hand)."""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from scripts.cluster_access import StackClusterReader
from scripts.commands.alerts import alert_text
from scripts.options import CANARY_OPTION
from scripts.run_progress import gather
from scripts.views.status import status_view
from scripts.views.terminal import console as rich_console
from scripts.views.terminal import live_view
from shared.config.config_files import load_config
from shared.control.alert_lines import AlertLine, alert_lines
from shared.model.layers import layer_count
from shared.model.state import RunState


def _now() -> datetime:
    return datetime.now(UTC)


DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"

DEMO_CONFIG_OPTION = click.option(
    "-c",
    "--config",
    "config_path",
    default=str(DEFAULT_CONFIG),
    type=click.Path(dir_okay=False),
    help="Default: examples/demo/pipeline.yml.",
)


@click.group(invoke_without_command=True)
@DEMO_CONFIG_OPTION
@click.option("--size", type=int, default=None, help="Volume edge in voxels (cube).")
@click.option("--chunk", type=int, default=None, help="Chunk edge in voxels (cube).")
@click.option(
    "--stages",
    default="ingest",
    show_default=True,
    help="Comma list: ingest, l2cache, meshing (the passes run after ingest, each checked "
    "by its own oracle).",
)
@click.option(
    "--advance", type=click.Choice(["auto", "approve"]), default="auto", show_default=True
)
@click.option(
    "--approve-after",
    "approve_after_s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="With --advance approve: the demo approves each layer SECONDS after it becomes "
    "eligible, as an operator would (`pipeline approve`). Without it, approve each layer "
    "yourself.",
)
@click.option("--timeout", "timeout_s", type=float, default=900, show_default=True)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the volume, pod logs and stack state here (default: temporary).",
)
@click.option("--json", "as_json", is_flag=True, help="End with one JSON summary line.")
@click.option(
    "--chaos",
    "chaos_n",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Inject N faults spread over the run and over kinds (docs/chaos.md); first a "
    "fault-free run of the same size, unless --baseline-wall-s.",
)
@click.option("--chaos-seed", type=int, default=1, show_default=True)
@click.option(
    "--chaos-kinds",
    default="all",
    show_default=True,
    help="Comma list of fault kinds, or 'cheap' (no 30 s API outage, Bigtable cut-off or "
    "fatal chunk or hung pod), or 'all'.",
)
@click.option(
    "--baseline-wall-s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="With --chaos: the fault-free wall time to measure against (skips that run).",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE.html",
    help="Write the run's HTML report here (needs the `report` extra).",
)
@CANARY_OPTION
@click.pass_context
def demo(
    ctx: click.Context,
    config_path: str,
    size: int | None,
    chunk: int | None,
    stages: str,
    advance: str,
    approve_after_s: float | None,
    timeout_s: float,
    workdir: str | None,
    as_json: bool,
    chaos_n: int | None,
    chaos_seed: int,
    chaos_kinds: str,
    baseline_wall_s: float | None,
    report_path: Path | None,
    canary_n: int | None,
) -> None:
    """Build the demo dataset's chunked graph unattended, then check it against an oracle.
    `pipeline demo data DIR` writes the demo's data for a build by hand instead."""
    if ctx.invoked_subcommand is not None:
        return
    from scripts.demo_run import DemoTimeoutError, prepare_config, run_demo
    from shared.config.stage_selection import check_stages
    from shared.model.stages import PlanError

    if approve_after_s is not None and advance != "approve":
        raise click.UsageError("--approve-after needs --advance approve")
    kinds = _chaos_kinds(chaos_n, chaos_kinds, baseline_wall_s)

    stage_list = [s.strip() for s in stages.split(",") if s.strip()]
    if workdir is not None:
        _check_fresh_workdir(Path(workdir))
    tmp = None if workdir else tempfile.TemporaryDirectory(prefix="cave-demo-")
    work = Path(workdir or tmp.name)  # type: ignore[union-attr]
    try:
        if report_path is not None:
            from scripts.views.report import _go

            _go()  # fail before the build, not after it, if plotly is missing
        cfg = prepare_config(load_config(config_path), work, size, chunk)
        if canary_n is not None:
            controller = cfg.controller.model_copy(update={"canary_chunks": canary_n})
            cfg = cfg.model_copy(update={"controller": controller})
        try:
            check_stages(cfg, stage_list)
        except PlanError as exc:
            raise click.UsageError(str(exc)) from None
        console = rich_console(100, stderr=as_json)  # the status view fits 100 columns
        console.print(
            f"demo: volume {cfg.ds.data_source.size}, chunks {cfg.ds.graph_config.CHUNK_SIZE}"
            f", layer-2 grid {cfg.layer2_shape()}, {layer_count(cfg.layer2_shape())} layers;"
            " starting the local stack…"
        )
        cluster = StackClusterReader(work / "stack")
        with live_view(console, refresh_per_second=4, transient=False) as update:
            args = dict(
                stages=stage_list,
                advance=advance,
                timeout_s=timeout_s,
                approve_after_s=approve_after_s,
                on_progress=lambda run: update(status_view(*gather(run, _now(), cluster))),
                on_finish=None if report_path is None else _reporter(report_path, console),
            )
            alerts_seen: list[AlertLine] = []
            if chaos_n is not None:  # the chaos run's alerts, listed at the end
                args["on_finish"] = _alerts_kept(alerts_seen, args["on_finish"])
            try:
                if chaos_n is None:
                    result = run_demo(cfg, work, **args)
                else:
                    cluster = StackClusterReader(work / "chaos" / "stack")
                    result = _run_chaos(
                        cfg, work, chaos_n, chaos_seed, kinds, baseline_wall_s, args
                    )
            except DemoTimeoutError as e:
                raise timed_out(e, chaos_n is not None) from None
        summary = result.summary()
        # The oracle's own verdict; a chaos run can fail its audit with the oracle agreeing.
        agrees = result.oracle["ok"]
        verdict = "[green]oracle agrees[/]" if agrees else "[red]oracle DISAGREES[/]"
        checked = [s for s in ("ingest", "l2cache", "meshing") if s in result.oracle]
        verdict += f" ({', '.join(checked)})"
        console.print(
            f"{verdict}: {built_layers(result.run, layer_count(cfg.layer2_shape()))}, "
            f"{summary['chunks']} chunks, {summary['pods']} pods ({summary['retries']} retries)"
            f" in {summary['wall_s']}s; chunk compute {summary['chunk_compute_s']}s"
        )
        for line in result.oracle["mismatches"]:
            console.print(f"  [red]{line}[/]")
        console.print(f"  {wall_parts_line(summary.get('timeline'))}", highlight=False)
        for name, v in summary["verify"].items():
            marked = "not checked" if v["chunks_marked"] is None else v["chunks_marked"]
            colour = "red" if v["complete"] is False else "default"
            console.print(
                f"  [{colour}]ledger: {name} {marked}/{v['chunks_expected']} chunks marked done[/]"
            )
        if chaos_n is not None:
            _print_chaos(console, summary)
            console.print(f"alerts ({len(alerts_seen)}; `pipeline alerts RUN` lists them):")
            for line in alerts_seen:
                console.print(Text("  ").append_text(alert_text(line)))
        if as_json:
            click.echo(json.dumps(summary))
    finally:
        if tmp is not None:
            tmp.cleanup()
    sys.exit(0 if result.ok else 1)


def built_layers(run: RunState, layers: int) -> str:
    """The graph's layers and what the run built of them, by stage: `5 layers, built ingest
    L2-L5` (layer 1 is the supervoxels: no Job builds it)."""
    built = []
    for stage in run.stages:
        mine = sorted(ls.layer for ls in run.layers.values() if ls.stage == stage)
        if mine:
            span = f"L{mine[0]}" if len(mine) == 1 else f"L{mine[0]}-L{mine[-1]}"
            built.append(f"{stage} {span}")
    return f"{layers} layers, built {', '.join(built)}"


# What a demo leaves in its --workdir: the stack's state and, with --chaos, the two runs'.
_DEMO_STATE = ("stack", "baseline", "chaos")


def _check_fresh_workdir(work: Path) -> None:
    """Refuse a --workdir holding an earlier demo's state: its local cluster, ledger records
    and chaos mailbox would mix with this run's (the earlier run's files are kept)."""
    found = [name for name in _DEMO_STATE if (work / name).exists()]
    if found:
        raise click.UsageError(
            f"--workdir {work} holds an earlier demo's state ({', '.join(found)}): "
            "choose an empty folder, or remove it first"
        )


def timed_out(error: Exception, chaos: bool) -> click.ClickException:
    """The demo's time ran out: where the run was, and the fix (more `--timeout`)."""
    why = (
        "a chaos run on local Kubernetes takes far longer than its fault-free run (each "
        "killed pod costs its index the Job controller's pod-failure back-off, 10 s doubling)"
        if chaos
        else "a loaded machine or a large --size takes longer"
    )
    return click.ClickException(f"{error}; {why}: run it again with a larger --timeout")


def _chaos_kinds(n: int | None, text: str, baseline_wall_s: float | None) -> tuple[str, ...]:
    """The --chaos-kinds asked for, checked (usage errors name the option)."""
    from shared.chaos.chaos_plan import ChaosPlanError, parse_kinds

    if n is None:
        if baseline_wall_s is not None:
            raise click.UsageError("--baseline-wall-s needs --chaos N")
        return ()
    try:
        return parse_kinds(text)
    except ChaosPlanError as e:
        raise click.UsageError(str(e)) from None


def _run_chaos(cfg, work, n, seed, kinds, baseline_wall_s, args):  # noqa: ANN001, ANN202
    from scripts.chaos_run import run_chaos_demo

    return run_chaos_demo(
        cfg, work, n=n, seed=seed, kinds=kinds, baseline_wall_s=baseline_wall_s, **args
    )


def wall_parts_line(timeline: dict[str, Any] | None) -> str:
    """Where the run's wall time went, one line (`pipeline run RUN --timeline` has it all)."""
    if not timeline:
        return "timeline: none recorded"
    parts = ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in timeline["parts_s"].items() if v)
    return (
        f"wall {timeline['wall_s']:.1f} s = {parts} s (stack start-up apart: "
        f"{timeline['stack_start_s']:.1f} s; `pipeline run RUN --timeline` per layer)"
    )


def chaos_audit_failures(summary: dict[str, Any]) -> list[str]:
    """What of a chaos run's audit failed beyond lost and unsafe chunks (the run fails on
    each, whatever the oracle says), worded for the operator."""
    failures = []
    if summary.get("partial_writes_left"):
        failures.append(
            f"{summary['partial_writes_left']} partial writes left (rows of an unfinished "
            "attempt still in the table: "
            + "; ".join(
                f"{d['kind']} on {d['pod']}, chunk {d['chunk_id']}, "
                f"{d['rows_in_final_table']} of {d['rows_at_kill']} rows"
                for d in summary.get("partial_writes_left_detail", [])
            )
            + ")"
        )
    if summary.get("chunks_unmarked_by_layer"):
        failures.append(f"chunks not marked done: {summary['chunks_unmarked_by_layer']}")
    if summary.get("zombie_takeovers_of_live_claims"):
        failures.append(f"{summary['zombie_takeovers_of_live_claims']} takeovers of a live claim")
    return failures


def _print_chaos(console: Console, summary: dict) -> None:
    faults = ", ".join(f"{k} {v}" for k, v in summary["faults"].items()) or "none"
    lost, unsafe = summary["chunks_lost"], summary["chunks_processed_twice_where_unsafe"]
    colour = "green" if lost == 0 and unsafe == 0 else "red"
    console.print(
        f"chaos: {sum(summary['faults'].values())} faults injected ({faults}); "
        f"[{colour}]{lost} chunks lost, {unsafe} processed twice where unsafe[/]; "
        f"{summary['extra_wall_s']}s over the fault-free {summary['baseline_wall_s']}s"
    )
    for failure in chaos_audit_failures(summary):
        console.print(f"  [red]chaos audit failed: {failure}[/]")


def _alerts_kept(into: list[AlertLine], then: Any) -> Any:
    """An on_finish that keeps the run's alerts (read while the emulators still serve), then
    calls `then` (the reporter, or None). The last run to finish wins: with --chaos, the
    chaos run after its baseline."""

    def finish(store: Any, run: RunState) -> None:
        into[:] = alert_lines(store.all_alerts(run.run_id))
        if then is not None:
            then(store, run)

    return finish


def _reporter(path: Path, console: Console):  # noqa: ANN202 - run_demo's on_finish
    def write(store: object, run: object) -> None:
        from scripts.commands.report import write_report

        size = write_report(store, run, path)
        console.print(f"report: {path} ({size / 1e6:.1f} MB)")

    return write


@demo.command("data")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@DEMO_CONFIG_OPTION
@click.option("--size", type=int, default=64, show_default=True, help="Volume edge (voxels).")
@click.option("--chunk", type=int, default=16, show_default=True, help="Chunk edge (voxels).")
@click.option(
    "--stages",
    default="ingest",
    show_default=True,
    help="Comma list: the dataset keeps the blocks of these passes (l2cache, meshing).",
)
def data(directory: Path, config_path: str, size: int, chunk: int, stages: str) -> None:
    """Write the demo's volume and a pipeline.yml + dataset.yml pair into DIR, for a build by
    hand: `pipeline setup -c DIR/pipeline.yml`, then `pipeline start -c DIR/pipeline.yml`."""
    from scripts.demo_data import write_demo_data

    wanted = [s.strip() for s in stages.split(",") if s.strip()]
    cfg_path = write_demo_data(Path(config_path), directory, size, chunk, wanted)
    cfg = load_config(cfg_path)
    click.echo(
        f"wrote {directory}/volume.npy ({size}^3 voxels), {cfg_path} and its dataset.yml "
        f"(chunks {chunk}^3, layer-2 grid {cfg.layer2_shape()}, stages {', '.join(wanted)})"
    )
    click.echo(f"next: pipeline setup -c {cfg_path}")


COMMANDS = (demo,)
