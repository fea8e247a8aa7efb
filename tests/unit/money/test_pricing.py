"""Spot pricing from the packaged Autopilot rate table; the cluster fee over a union of spans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.money.pricing import (
    Rate,
    cluster_fee,
    load_rates,
    parse_rates,
    pod_cost,
    rate_for,
    union_seconds,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


SMALL = """region,compute_class,cpu_on_demand,cpu_spot,mem_on_demand,mem_spot,cluster_fee_hr
r1,general-purpose,0.04,0.01,0.004,0.001,0.1
r1,Balanced,0.06,0.02,0.006,0.002,0.1
r2,general-purpose,0.05,0.015,0.005,0.0015,0.2
"""


def test_packaged_table_loads():
    rates = load_rates()
    assert len(rates) > 50
    assert all(r.cpu_spot < r.cpu_on_demand and r.mem_spot < r.mem_on_demand for r in rates)
    assert {"general-purpose", "Balanced", "Scale-Out"} <= {r.compute_class for r in rates}
    assert load_rates() is rates  # read once


@pytest.mark.parametrize(
    ("region", "cls", "spot", "cpu_hr", "mem_hr"),
    [
        ("us-east1", "", True, 0.0133, 0.0014767),  # "" means general-purpose
        ("us-east1", "general-purpose", True, 0.0133, 0.0014767),
        ("us-east1", "general-purpose", False, 0.0445, 0.0049225),
        ("us-east1", "Balanced", True, 0.0194, 0.0021406),
        ("us-east1", "balanced", True, 0.0194, 0.0021406),  # case-insensitive
        ("europe-west1", "Scale-Out", False, 0.0617, 0.0068294),
        ("asia-east1", "", True, 0.0155, 0.0017099),
    ],
)
def test_rate_for_packaged(region, cls, spot, cpu_hr, mem_hr):
    rate = rate_for(load_rates(), region, cls, spot=spot)
    assert (rate.cpu_hr, rate.mem_hr, rate.cluster_fee_hr) == (cpu_hr, mem_hr, 0.1)
    assert (rate.region, rate.spot) == (region, spot)


@pytest.mark.parametrize(
    ("region", "cls", "expected"),
    [
        ("r9", "", "region 'r9' is not in the rate table; known: r1, r2"),
        ("r2", "Balanced", "'Balanced' has no rate in r2; known there: general-purpose"),
        ("r1", "Performance", "known there: Balanced, general-purpose"),
    ],
)
def test_rate_for_unknown(region, cls, expected):
    with pytest.raises(ValueError) as exc:
        rate_for(parse_rates(SMALL), region, cls)
    assert expected in str(exc.value)


def test_rate_for_accepts_a_generator():
    rate = rate_for((r for r in parse_rates(SMALL)), "r2", "")
    assert rate.cluster_fee_hr == 0.2


def test_unknown_class_in_packaged_table_lists_that_regions_classes():
    with pytest.raises(ValueError, match="Balanced, general-purpose"):
        rate_for(load_rates(), "africa-south1", "Scale-Out")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("region,compute_class\nr1,x\n", "missing column"),
        (SMALL.replace("0.04", "cheap"), "line 2: a price is not a number"),
        (SMALL.replace("0.04", "-0.04"), "line 2: negative price"),
    ],
)
def test_parse_rates_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        parse_rates(text)


RATE = Rate("r1", "general-purpose", True, cpu_hr=0.01, mem_hr=0.001, cluster_fee_hr=0.1)


@pytest.mark.parametrize(
    ("cpu", "mem", "seconds", "expected"),
    [
        (1.0, 1.0, 3600, 0.011),
        (2.0, 4.0, 1800, 0.012),
        (0.25, 0.5, 60, (0.0025 + 0.0005) / 60),
        (0.25, 0.5, 0, 0.0),
        (0.0, 0.0, 3600, 0.0),
    ],
)
def test_pod_cost(cpu, mem, seconds, expected):
    assert pod_cost(RATE, cpu, mem, seconds) == pytest.approx(expected)


@pytest.mark.parametrize(("cpu", "mem", "seconds"), [(-1, 1, 1), (1, -1, 1), (1, 1, -1)])
def test_pod_cost_rejects_negatives(cpu, mem, seconds):
    with pytest.raises(ValueError):
        pod_cost(RATE, cpu, mem, seconds)


def test_pod_cost_spot_is_cheaper():
    rates = load_rates()
    spot, od = rate_for(rates, "us-east1", ""), rate_for(rates, "us-east1", "", spot=False)
    assert pod_cost(spot, 1, 4, 3600) < pod_cost(od, 1, 4, 3600)


@pytest.mark.parametrize(
    ("spans", "hours"),
    [
        ([], 0.0),
        ([(0, 1)], 1.0),
        ([(0, 0)], 0.0),
        ([(0, 1), (2, 3)], 2.0),  # disjoint
        ([(0, 2), (1, 3)], 3.0),  # overlapping Jobs pay the hour once
        ([(0, 3), (1, 2)], 3.0),  # nested
        ([(0, 1), (1, 2)], 2.0),  # touching
        ([(2, 3), (0, 2.5)], 3.0),  # unsorted input
        ([(0, 1), (0, 1), (0, 1)], 1.0),  # duplicates
        ([(0, 1), (0.5, 4), (5, 6), (5.5, 5.75)], 5.0),  # mixed
    ],
)
def test_cluster_fee_over_the_union(spans, hours):
    dt_spans = [(at(a), at(b)) for a, b in spans]
    assert union_seconds(dt_spans) == pytest.approx(hours * 3600)
    assert cluster_fee(RATE, dt_spans) == pytest.approx(hours * 0.1)


def test_cluster_fee_rejects_a_backwards_span():
    with pytest.raises(ValueError, match="ends before it starts"):
        cluster_fee(RATE, [(at(2), at(1))])
