"""`pipeline rates` and `pipeline rates update`: the Autopilot rate table costs are priced
from, where it came from, and its refresh from the Cloud Billing Catalog API
(docs/operating.md#the-rate-table)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import click

from shared.money.pricing import parse_rates
from shared.money.rate_catalog import (
    CATALOG,
    GKE_SERVICE,
    RateCatalogError,
    RateSource,
    parse_source,
    refreshed,
    rows_csv,
    rows_from_skus,
    wanted_rows,
)

FOLDER_OPTION = click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The folder holding data/autopilot-rates.csv (default: the package's shared/).",
)


def _files(folder: Path | None):  # noqa: ANN202 - adapters.local.rate_table.RateTableFiles
    from adapters.wiring import cli_services

    return cli_services().rate_tables(folder)


def _source(text: str) -> RateSource:
    return parse_source(text) if text else RateSource("", "no source record")


@click.group(invoke_without_command=True)
@FOLDER_OPTION
@click.option("--region", "regions", multiple=True, help="Only these regions' rows.")
@click.pass_context
def rates(ctx: click.Context, folder: Path | None, regions: tuple[str, ...]) -> None:
    """The Autopilot rate table ($ per vCPU-hour and GiB-hour, Spot and on-demand, by region
    and compute class) and when it was last refreshed."""
    if ctx.invoked_subcommand is not None:
        return
    table, source = _files(folder).read()
    click.echo(_source(source).line())
    shown = [r for r in parse_rates(table) if not regions or r.region in regions]
    if regions and not shown:
        raise click.BadParameter(
            f"no row for {', '.join(regions)} in the table", param_hint="--region"
        )
    click.echo("region compute_class cpu_spot cpu_on_demand mem_spot mem_on_demand cluster_fee_hr")
    for r in shown:
        click.echo(
            f"{r.region} {r.compute_class} {r.cpu_spot:g} {r.cpu_on_demand:g} {r.mem_spot:g} "
            f"{r.mem_on_demand:g} {r.cluster_fee_hr:g}"
        )


@rates.command()
@FOLDER_OPTION
@click.option(
    "--region",
    "regions",
    multiple=True,
    help="Refresh these regions (repeatable). Default: the config's region, else every region "
    "of the table.",
)
@click.option("-c", "--config", "config_path", default=None, type=click.Path(dir_okay=False))
@click.option(
    "--api-key",
    default=lambda: os.environ.get("GCP_BILLING_API_KEY", ""),
    show_default="$GCP_BILLING_API_KEY",
    help="A Cloud Billing Catalog API key; without one, Application Default Credentials.",
)
@click.option("--endpoint", default="", hidden=True)  # a test's server
def update(
    folder: Path | None,
    regions: tuple[str, ...],
    config_path: str | None,
    api_key: str,
    endpoint: str,
) -> None:
    """Refresh the table's rows from the Cloud Billing Catalog API (Kubernetes Engine's
    Autopilot pod SKUs). A SKU missing for a row, or an API that cannot be read: an error,
    and the table is left as it was."""
    from adapters.wiring import cli_services

    price_catalog = cli_services().price_catalog

    files = _files(folder)
    old_text, _ = files.read()
    old = parse_rates(old_text)
    if not regions and config_path:
        from shared.config.config_files import load_config

        regions = (load_config(config_path).region,)
    regions = regions or tuple(sorted({r.region for r in old}))
    wanted = wanted_rows(old, regions)
    fees = {(r.region, r.compute_class): r.cluster_fee_hr for r in old}
    skus = list(price_catalog(api_key, endpoint).skus(GKE_SERVICE))
    try:
        new = rows_from_skus(skus, wanted, fees)
    except RateCatalogError as e:
        raise click.ClickException(str(e)) from None
    at = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    source = RateSource(at, f"{CATALOG}, service {GKE_SERVICE}", tuple(regions), len(skus))
    files.write(rows_csv(refreshed(old, new)), source.to_json())
    changed = sum(1 for r in new if r not in old)
    click.echo(f"{len(new)} rows refreshed ({changed} changed) for {', '.join(regions)}")
    click.echo(source.line())


COMMANDS = (rates,)
