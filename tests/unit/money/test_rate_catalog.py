"""The rate table from the Cloud Billing Catalog's SKUs: the fixture pages in the published
shape (validated against the cloudbilling v1 discovery document's schemas), which SKU feeds
which price, a SKU missing refused naming the rows, and the source record
(docs/operating.md#the-rate-table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.money.pricing import RateRow, parse_rates
from shared.money.rate_catalog import (
    Dimension,
    RateCatalogError,
    RateSource,
    parse_source,
    pod_sku,
    refreshed,
    rows_csv,
    rows_from_skus,
    wanted_rows,
)
from tests.builders.discovery import discovery_document, schema_problems

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cloudbilling"
PAGES = [json.loads((FIXTURES / f"skus_page{n}.json").read_text()) for n in (1, 2)]
SKUS = [s for page in PAGES for s in page["skus"]]
FEES = {("us-east1", "general-purpose"): 0.1, ("us-east1", "Balanced"): 0.1}


@pytest.mark.parametrize("page", [0, 1])
def test_the_fixture_pages_are_list_skus_responses_of_the_published_schema(page):
    doc = discovery_document("cloudbilling.v1.json")
    assert doc["name"] == "cloudbilling" and doc["version"] == "v1"
    method = doc["resources"]["services"]["resources"]["skus"]["methods"]["list"]
    assert method["response"] == {"$ref": "ListSkusResponse"}
    assert schema_problems(PAGES[page], method["response"], doc["schemas"], "page") == []


def test_the_schema_walker_finds_a_sku_out_of_shape():
    """The check above can fail: a Sku with a misspelt field or a number where the API sends
    an int64 (a JSON string) is caught."""
    doc = discovery_document("cloudbilling.v1.json")
    bad = json.loads(json.dumps(SKUS[0]))
    bad["serviceRegion"] = bad.pop("serviceRegions")
    bad["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["units"] = 0.5
    problems = schema_problems(bad, {"$ref": "Sku"}, doc["schemas"], "sku")
    assert any("'serviceRegion' is not a property" in p for p in problems)
    assert any("units: a string expected" in p for p in problems)


@pytest.mark.parametrize(
    ("description", "usage", "expected"),
    [
        ("Autopilot Pod mCPU Requests (us-east1)", "OnDemand", ("general-purpose", "cpu", False)),
        ("Autopilot Spot Pod Memory Requests (x)", "Preemptible", ("general-purpose", "mem", True)),
        ("Autopilot Balanced Spot Pod mCPU Requests (x)", "Preemptible", ("Balanced", "cpu", True)),
        ("Autopilot Scale-Out Pod Memory Requests (x)", "OnDemand", ("Scale-Out", "mem", False)),
        ("Autopilot Scale-Out Arm Spot Pod mCPU Requests (x)", "Preemptible", None),
        ("Autopilot Pod Ephemeral Storage Requests (x)", "OnDemand", None),
        ("Autopilot Pod mCPU Requests (Accelerator GPU nvidia-l4) (x)", "OnDemand", None),
        ("Regional Kubernetes Clusters", "OnDemand", None),
        ("N2 Instance Core running in Americas", "OnDemand", None),
    ],
)  # fmt: skip
def test_which_sku_feeds_which_price(description, usage, expected):
    sku = json.loads(json.dumps(SKUS[0]))
    sku["description"], sku["category"]["usageType"] = description, usage
    got = pod_sku(sku)
    if expected is None:
        assert got is None
    else:
        assert (got.compute_class, got.dimension.value, got.spot) == expected


def test_a_cpu_sku_is_priced_per_vcpu_and_a_tiered_sku_at_its_last_tier():
    cpu = pod_sku(SKUS[0])  # us-east1 general-purpose on-demand, $0.0000445 per mCPU-hour
    assert cpu.dimension is Dimension.CPU and cpu.usd_per_unit_hour == pytest.approx(0.0445)
    mem = pod_sku(SKUS[2])  # a free first tier, then $0.0049225 per GiB-hour
    assert len(SKUS[2]["pricingInfo"][0]["pricingExpression"]["tieredRates"]) == 2
    assert mem.usd_per_unit_hour == pytest.approx(0.0049225)


def test_rows_from_the_fixture_pages():
    rows = rows_from_skus(SKUS, [("us-east1", "general-purpose"), ("us-east1", "Balanced")], FEES)
    assert rows == (
        RateRow("us-east1", "general-purpose", 0.0445, 0.0134, 0.0049225, 0.0014768, 0.1),
        RateRow("us-east1", "Balanced", 0.0645, 0.0195, 0.0071354, 0.0021407, 0.1),
    )


@pytest.mark.parametrize(
    ("drop", "wanted", "named"),
    [
        (
            "Autopilot Spot Pod mCPU Requests (us-east1)",
            [("us-east1", "general-purpose")],
            "us-east1 general-purpose: cpu_spot",
        ),
        (
            "Autopilot Balanced Pod Memory Requests (us-east1)",
            [("us-east1", "Balanced")],
            "us-east1 Balanced: mem_on_demand",
        ),
        (
            "",
            [("asia-east1", "general-purpose")],
            "asia-east1 general-purpose: cpu_on_demand, cpu_spot, mem_on_demand, mem_spot",
        ),
        ("", [("europe-west1", "Balanced")], "europe-west1 Balanced"),
    ],
)
def test_a_sku_missing_is_refused_naming_the_row_and_the_price(drop, wanted, named):
    skus = [s for s in SKUS if s["description"] != drop]
    with pytest.raises(RateCatalogError, match="the table is unchanged") as e:
        rows_from_skus(skus, wanted, FEES)
    assert named in str(e.value)


def test_a_refresh_replaces_its_rows_and_keeps_the_others():
    old = (
        RateRow("r1", "general-purpose", 1, 1, 1, 1, 0.1),
        RateRow("r2", "general-purpose", 2, 2, 2, 2, 0.1),
    )
    new = (
        RateRow("r2", "general-purpose", 3, 3, 3, 3, 0.1),
        RateRow("r0", "Balanced", 4, 4, 4, 4, 0.1),
    )
    out = refreshed(old, new)
    assert [(r.region, r.cpu_spot) for r in out] == [("r0", 4), ("r1", 1), ("r2", 3)]
    assert parse_rates(rows_csv(out)) == out  # the CSV written reads back the same


@pytest.mark.parametrize(
    ("regions", "expected"),
    [
        (["r1"], [("r1", "Balanced"), ("r1", "general-purpose")]),
        (["new"], [("new", "general-purpose")]),
    ],
)
def test_the_rows_a_refresh_must_price(regions, expected):
    old = (
        RateRow("r1", "general-purpose", 1, 1, 1, 1, 0.1),
        RateRow("r1", "Balanced", 1, 1, 1, 1, 0.1),
    )
    assert wanted_rows(old, regions) == expected


@pytest.mark.parametrize(
    ("source", "line"),
    [
        (RateSource("", "the predecessor's rates.csv"), "never refreshed here"),
        (
            RateSource("2026-12-03T13:00:00Z", "Cloud Billing Catalog API", ("us-east1",), 21),
            "refreshed 2026-12-03T13:00:00Z from Cloud Billing Catalog API for us-east1 (21 SKUs",
        ),
    ],
)
def test_the_source_record_says_when_and_from_what(source, line):
    assert line in source.line()
    assert parse_source(source.to_json()) == source


def test_the_packaged_table_has_a_source_record():
    from shared.money.pricing import load_rate_source_text

    assert "predecessor" in parse_source(load_rate_source_text()).source
