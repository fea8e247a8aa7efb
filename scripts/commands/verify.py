"""`pipeline verify RUN [--stage S] [--json]`: the run's chunks marked done against its grid.

Reads the ledger of each stage in key ranges (adapters.bigtable.ledger_scan) and
compares it with every layer's planned grid (shared.reconcile.completeness); docs/verify.md. Exit 0
when every layer the run records as built is complete, 1 when one is not.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from scripts.layer_target import run_config
from scripts.options import JSON_OPTION
from scripts.services import connect
from scripts.views.terminal import console, titled_table
from shared.model.state import RunState, layer_key
from shared.reconcile.completeness import (
    MAX_RANGES,
    StageVerdict,
    root_check_failures,
    run_complete,
    verify_run,
)
from shared.reconcile.root_check import CHECK


def verify_document(run: RunState, verdicts: dict[str, StageVerdict]) -> dict[str, Any]:
    """The `--json` document: per stage its verdict, each layer with the run's phase."""
    stages = {}
    for name, verdict in verdicts.items():
        doc = verdict.to_json()
        for layer in doc["layers"]:
            ls = run.layers[layer_key(name, layer["layer"])]
            layer["phase"] = ls.phase
            layer["root_check_failed"] = ls.root_check_failed
        stages[name] = doc
    failed = [{"stage": v.stage, "layer": v.layer} for v in root_check_failures(run, verdicts)]
    return {
        "run_id": run.run_id,
        "complete": run_complete(run, verdicts),
        "root_check_failed": failed,
        "stages": stages,
    }


def _print(run: RunState, verdicts: dict[str, StageVerdict]) -> None:
    out = console()
    table = titled_table(
        f"run {run.run_id}: chunks marked done in the ledger against the grid",
        ("stage", "layer", "phase", "marked", "expected", "missing (flat positions)", "e.g."),
    )
    for name, verdict in verdicts.items():
        if not verdict.coverage.checkable:
            table.add_row(name, "all", "", "-", str(verdict.chunks_expected), "not checked", "")
            continue
        for v in verdict.layers:
            ls = run.layers[layer_key(name, v.layer)]
            more = v.missing_range_count - min(v.missing_range_count, MAX_RANGES)
            ranges = v.missing_ranges + (f" (+{more} more intervals)" if more > 0 else "")
            example = v.examples[0] if v.examples else None
            table.add_row(
                name,
                str(v.layer),
                f"{ls.phase} (root check)" if ls.root_check_failed else ls.phase,
                str(v.chunks_marked),
                str(v.chunks_expected),
                ranges or "none",
                f"{example.coord} id {example.chunk_id}" if example else "",
            )
    out.print(table)
    for name, verdict in verdicts.items():
        if not verdict.coverage.checkable:
            out.print(f"{name}: not checked: {verdict.coverage.why}")
    for v in root_check_failures(run, verdicts):
        out.print(
            f"ROOT CHECK FAILED: {v.stage} layer {v.layer} has every chunk marked done, but "
            f"{CHECK} failed after it: not a complete layer; `pipeline inspect {run.run_id} "
            f"{v.stage} {v.layer}` shows why, `pipeline submit {run.run_id} {v.stage} "
            f"{v.layer}` re-runs only the check"
        )
    if run_complete(run, verdicts):
        out.print("complete: every built layer has all its chunks marked done")
    elif not root_check_failures(run, verdicts):  # else said above
        out.print(
            "INCOMPLETE: a built layer has chunks without a done marker; re-run it with "
            f"`pipeline submit {run.run_id} STAGE LAYER` (done chunks are skipped)"
        )


@click.command()
@click.argument("run_id")
@click.option("--stage", default=None, help="Only this stage (default: every stage of the run).")
@JSON_OPTION
def verify(run_id: str, stage: str | None, as_json: bool) -> None:
    """Count each layer's chunks marked done in the ledger against the run's grid and list
    the ones that are not (intervals of flat grid positions, examples with coordinates).
    Stages whose images write no done markers are reported as not checked. Exit 1 when a
    built layer is incomplete."""
    from adapters.wiring import cli_services

    run = connect().store.load_run(run_id)
    verdicts = verify_run(run_config(run), run, cli_services().done_markers, stage)
    if as_json:
        click.echo(json.dumps(verify_document(run, verdicts), indent=2))
    else:
        _print(run, verdicts)
    if not run_complete(run, verdicts):
        sys.exit(1)


COMMANDS = (verify,)
