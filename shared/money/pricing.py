"""Autopilot cost: pod requests times the regional rate, plus the flat cluster fee.

Autopilot bills pod requests per second (per vCPU-hour and GiB-hour, Spot or on-demand) and a
flat fee per cluster-hour. The rate table ships with the package (`shared/data/
autopilot-rates.csv`); `load_rates` reads it, everything else here is pure arithmetic so the
ledger and the budget check can price spans recorded anywhere.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from importlib import resources

from shared.jobs.autopilot import GENERAL_PURPOSE, normalize_class

# The table and the record of its last refresh (`pipeline rates update` writes both).
RATES_FILE = "data/autopilot-rates.csv"
RATES_SOURCE_FILE = "data/autopilot-rates.source.json"

_COLUMNS = (
    "region",
    "compute_class",
    "cpu_on_demand",
    "cpu_spot",
    "mem_on_demand",
    "mem_spot",
    "cluster_fee_hr",
)


@dataclass(frozen=True)
class RateRow:
    """One row of the rate table: $/vCPU-hour, $/GiB-hour and $/cluster-hour."""

    region: str
    compute_class: str
    cpu_on_demand: float
    cpu_spot: float
    mem_on_demand: float
    mem_spot: float
    cluster_fee_hr: float


@dataclass(frozen=True)
class Rate:
    """The prices that apply to one region, class and provisioning model."""

    region: str
    compute_class: str
    spot: bool
    cpu_hr: float  # $ per vCPU-hour
    mem_hr: float  # $ per GiB-hour
    cluster_fee_hr: float  # $ per cluster-hour


def parse_rates(text: str) -> tuple[RateRow, ...]:
    """Parse rate-table CSV text; a missing column or a bad number raises ValueError."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"rate table: missing column(s) {', '.join(missing)}")
    rows = []
    for line, rec in enumerate(reader, start=2):
        try:
            prices = [float(rec[c]) for c in _COLUMNS[2:]]
        except (TypeError, ValueError):
            raise ValueError(f"rate table line {line}: a price is not a number: {rec}") from None
        if min(prices) < 0:
            raise ValueError(f"rate table line {line}: negative price: {rec}")
        rows.append(RateRow(rec["region"].strip(), rec["compute_class"].strip(), *prices))
    return tuple(rows)


@lru_cache(maxsize=1)
def load_rates() -> tuple[RateRow, ...]:
    """The packaged Autopilot rate table (the one I/O of this module; read once)."""
    text = resources.files("shared").joinpath(RATES_FILE).read_text("utf-8")
    return parse_rates(text)


def load_rate_source_text() -> str:
    """The packaged record of where the rate table came from (its sidecar JSON;
    `shared.money.rate_catalog.parse_source` reads it)."""
    return resources.files("shared").joinpath(RATES_SOURCE_FILE).read_text("utf-8")


def rate_for(rates: Iterable[RateRow], region: str, compute_class: str, spot: bool = True) -> Rate:
    """The rate of `compute_class` ("" = general-purpose) in `region`.

    Class names match case-insensitively. An unknown region or class raises ValueError listing
    what the table knows (the regions, or that region's classes).
    """
    rates = tuple(rates)  # iterated twice below; a generator would be spent after one pass
    wanted = normalize_class(compute_class)
    in_region = [r for r in rates if r.region == region]
    if not in_region:
        known = sorted({r.region for r in rates})
        raise ValueError(f"region {region!r} is not in the rate table; known: {', '.join(known)}")
    for row in in_region:
        if normalize_class(row.compute_class) == wanted:
            return Rate(
                region=region,
                compute_class=row.compute_class,
                spot=spot,
                cpu_hr=row.cpu_spot if spot else row.cpu_on_demand,
                mem_hr=row.mem_spot if spot else row.mem_on_demand,
                cluster_fee_hr=row.cluster_fee_hr,
            )
    known = sorted(r.compute_class for r in in_region)
    shown = compute_class or GENERAL_PURPOSE
    raise ValueError(
        f"compute class {shown!r} has no rate in {region}; known there: {', '.join(known)}"
    )


def pod_cost(rate: Rate, cpu: float, memory_gib: float, seconds: float) -> float:
    """Dollars for one pod requesting `cpu` vCPU and `memory_gib` GiB for `seconds`."""
    if cpu < 0 or memory_gib < 0 or seconds < 0:
        raise ValueError(
            f"cpu, memory and seconds must be >= 0, got {cpu}, {memory_gib}, {seconds}"
        )
    return (cpu * rate.cpu_hr + memory_gib * rate.mem_hr) * seconds / 3600.0


def union_seconds(spans: Sequence[tuple[datetime, datetime]]) -> float:
    """Seconds covered by at least one span (overlaps and nested spans counted once)."""
    for start, end in spans:
        if end < start:
            raise ValueError(f"span ends before it starts: {start.isoformat()} > {end.isoformat()}")
    total = 0.0
    cur_start: datetime | None = None
    cur_end: datetime | None = None
    for start, end in sorted(spans):
        if cur_end is None or start > cur_end:  # a gap: close the running block
            if cur_start is not None and cur_end is not None:
                total += (cur_end - cur_start).total_seconds()
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_start is not None and cur_end is not None:
        total += (cur_end - cur_start).total_seconds()
    return total


def cluster_fee(rate: Rate, spans: Sequence[tuple[datetime, datetime]]) -> float:
    """The cluster fee over the union of `spans`: Jobs that overlap pay the hour once.

    Whether the fee is covered by a free-tier credit depends on the billing account, which the
    pipeline cannot see; callers that know may pass a zero-fee Rate.
    """
    return union_seconds(spans) / 3600.0 * rate.cluster_fee_hr


@dataclass(frozen=True)
class CloudPrice:
    """One list price beside Autopilot's: what, per which unit, and where and when it was read."""

    item: str
    unit: str
    usd: float
    source: str
    date: str


def parse_cloud_prices(text: str) -> dict[str, CloudPrice]:
    """Parse `shared/data/cloud-prices.csv` text (item,unit,usd,source,date), by item; a bad
    or negative price raises ValueError naming the line."""
    out = {}
    for line, rec in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            usd = float(rec["usd"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"cloud price table line {line}: no number in usd: {rec}") from None
        if usd < 0:
            raise ValueError(f"cloud price table line {line}: negative price: {rec}")
        out[rec["item"]] = CloudPrice(rec["item"], rec["unit"], usd, rec["source"], rec["date"])
    return out


@lru_cache(maxsize=1)
def load_cloud_prices() -> dict[str, CloudPrice]:
    """The packaged prices of Bigtable, the functions, Firestore, Pub/Sub, Logging and
    Scheduler (the whole bill, shared.money.bill; read once)."""
    text = resources.files("shared").joinpath("data/cloud-prices.csv").read_text("utf-8")
    return parse_cloud_prices(text)
