"""The Autopilot rate table from the Cloud Billing Catalog's SKUs, and where the table came from
(docs/operating.md#the-rate-table).

Pure: `rows_from_skus` reads SKUs in the published `services.skus.list` shape (the
`Sku` schema of the cloudbilling v1 discovery document) and `refreshed` merges them into the
table; `RateSource` is the record of the last refresh kept beside the table. The adapter
(`adapters.google.billing_catalog`) fetches the pages; `pipeline rates update` writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from shared.money.pricing import RateRow

# Kubernetes Engine's service id in the Cloud Billing Catalog (the predecessor's too).
GKE_SERVICE = "CCD8-9BF1-090E"
CATALOG = "Cloud Billing Catalog API (cloudbilling v1 services.skus.list)"

PRICE_FIELDS = ("cpu_on_demand", "cpu_spot", "mem_on_demand", "mem_spot")


class Dimension(StrEnum):
    """What an Autopilot pod SKU bills (the table prices these two)."""

    CPU = "cpu"
    MEMORY = "mem"


class RateCatalogError(ValueError):
    """The catalog's SKUs do not give a whole row the table needs (names the rows and
    fields); the table is left as it was."""


@dataclass(frozen=True)
class PodSku:
    """One Autopilot pod SKU read from the catalog: class, dimension, Spot or not, the
    regions it covers and its price ($ per vCPU-hour or GiB-hour)."""

    compute_class: str
    dimension: Dimension
    spot: bool
    regions: tuple[str, ...]
    usd_per_unit_hour: float
    sku_id: str


def _unit_price(sku: Mapping[str, Any]) -> float:
    """The SKU's price per usage unit: the last tier's (a free first tier costs 0)."""
    tiers = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"]
    money = tiers[-1]["unitPrice"]
    return int(money.get("units") or 0) + int(money.get("nanos") or 0) / 1e9  # units: int64 str


def _compute_class(description: str) -> str | None:
    """The compute class an Autopilot pod SKU's description names; None: not one the table
    keeps (Arm Scale-Out bills apart from the x86 rows; accelerators are node-billed)."""
    if "Arm" in description or "GPU" in description or "TPU" in description:
        return None
    if "Balanced" in description:
        return "Balanced"
    if "Scale-Out" in description:
        return "Scale-Out"
    return "general-purpose"


def pod_sku(sku: Mapping[str, Any]) -> PodSku | None:
    """The Autopilot pod request SKU `sku` is, or None when it is none the table prices
    (ephemeral storage, cluster fee, node SKUs, Arm, accelerators). The descriptions read
    "Autopilot [Balanced |Scale-Out ][Spot ]Pod mCPU Requests (region)" or "... Memory
    Requests ..."; Spot SKUs are the `Preemptible` usage type."""
    desc = str(sku.get("description", ""))
    if "Autopilot" not in desc or "Pod" not in desc or "Requests" not in desc:
        return None
    if "mCPU" in desc:
        dim, per_unit = Dimension.CPU, 1000.0  # priced per mCPU-hour: the table is per vCPU
    elif "Memory" in desc:
        dim, per_unit = Dimension.MEMORY, 1.0  # per GiB-hour already
    else:
        return None
    cls = _compute_class(desc)
    if cls is None or not sku.get("pricingInfo"):
        return None
    spot = (sku.get("category") or {}).get("usageType") == "Preemptible"
    return PodSku(
        compute_class=cls,
        dimension=dim,
        spot=spot,
        regions=tuple(sku.get("serviceRegions") or ()),
        usd_per_unit_hour=round(_unit_price(sku) * per_unit, 8),
        sku_id=str(sku.get("skuId", "")),
    )


def _field(s: PodSku) -> str:
    return f"{s.dimension.value}_{'spot' if s.spot else 'on_demand'}"


def rows_from_skus(
    skus: Iterable[Mapping[str, Any]],
    wanted: Sequence[tuple[str, str]],
    cluster_fee_hr: Mapping[tuple[str, str], float],
) -> tuple[RateRow, ...]:
    """The rows (region, compute class) in `wanted`, priced from `skus`; the cluster fee,
    which no pod SKU carries, from `cluster_fee_hr` (the old table's). RateCatalogError
    names every wanted row a SKU is missing for, and which prices."""
    prices: dict[tuple[str, str], dict[str, float]] = {}
    wanted_set = set(wanted)
    for raw in skus:
        s = pod_sku(raw)
        if s is None:
            continue
        for region in s.regions:
            if (region, s.compute_class) in wanted_set:
                prices.setdefault((region, s.compute_class), {})[_field(s)] = s.usd_per_unit_hour
    missing = []
    rows = []
    for region, cls in wanted:
        got = prices.get((region, cls), {})
        lacking = [f for f in PRICE_FIELDS if f not in got]
        if lacking:
            missing.append(f"{region} {cls}: {', '.join(lacking)}")
            continue
        fee = cluster_fee_hr.get((region, cls), 0.10)
        rows.append(RateRow(region, cls, *(got[f] for f in PRICE_FIELDS), fee))
    if missing:
        raise RateCatalogError(
            "the catalog has no Autopilot pod SKU for "
            + "; ".join(missing)
            + " (the table is unchanged; check the region and class names, or the SKU "
            "descriptions the catalog now uses)"
        )
    return tuple(rows)


def refreshed(old: Sequence[RateRow], new: Sequence[RateRow]) -> tuple[RateRow, ...]:
    """`old` with every row of `new` in place of the same (region, class), sorted."""
    by_key = {(r.region, r.compute_class): r for r in old}
    by_key.update({(r.region, r.compute_class): r for r in new})
    return tuple(by_key[k] for k in sorted(by_key))


def rows_csv(rows: Sequence[RateRow]) -> str:
    """The table's CSV text (`shared.money.pricing.parse_rates` reads it back)."""
    head = "region,compute_class," + ",".join(PRICE_FIELDS) + ",cluster_fee_hr\n"
    body = "".join(
        f"{r.region},{r.compute_class},{r.cpu_on_demand:g},{r.cpu_spot:g},"
        f"{r.mem_on_demand:g},{r.mem_spot:g},{r.cluster_fee_hr:g}\n"
        for r in rows
    )
    return head + body


@dataclass(frozen=True)
class RateSource:
    """Where the table came from: when it was refreshed (ISO 8601, UTC; "" if never), from
    what source, which regions, and how many SKUs were read."""

    refreshed_at: str
    source: str
    regions: tuple[str, ...] = ()
    skus_read: int = 0

    def line(self) -> str:
        """One line for the operator."""
        if not self.refreshed_at:
            return f"rate table: {self.source}; never refreshed here (`pipeline rates update`)"
        where = f" for {', '.join(self.regions)}" if self.regions else ""
        return (
            f"rate table: refreshed {self.refreshed_at} from {self.source}{where} "
            f"({self.skus_read} SKUs read)"
        )

    def to_json(self) -> str:
        """The sidecar file's text."""
        return json.dumps({**asdict(self), "regions": list(self.regions)}, indent=2) + "\n"


def parse_source(text: str) -> RateSource:
    """The sidecar file's record; ValueError names a missing key."""
    data = json.loads(text)
    try:
        return RateSource(
            refreshed_at=str(data["refreshed_at"] or ""),
            source=str(data["source"]),
            regions=tuple(data.get("regions") or ()),
            skus_read=int(data.get("skus_read") or 0),
        )
    except KeyError as e:
        raise ValueError(f"rate table source record: no {e.args[0]!r}") from None


def wanted_rows(old: Sequence[RateRow], regions: Sequence[str]) -> list[tuple[str, str]]:
    """The (region, class) rows a refresh of `regions` must price: the table's rows there, or
    general-purpose alone for a region the table does not have yet."""
    out: list[tuple[str, str]] = []
    for region in regions:
        known = sorted(r.compute_class for r in old if r.region == region)
        out += [(region, c) for c in known or ["general-purpose"]]
    return out
