"""shared.views.fleet: percentiles, spreads, bands and the fleet summary (table-driven)."""

from __future__ import annotations

import pytest

from shared.views.fleet import PodSample, bands, count_oom, percentile, spread, summarize


@pytest.mark.parametrize(
    "values, q, expected",
    [
        ([5.0], 50, 5.0),
        ([1.0, 2.0, 3.0, 4.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([0.0, 10.0], 10, 1.0),
        ([float(i) for i in range(101)], 99, 99.0),
    ],
)
def test_percentile_is_linear_between_ranks(values, q, expected):
    assert percentile(values, q) == pytest.approx(expected)


@pytest.mark.parametrize("values, q", [([], 50), ([1.0], -1), ([1.0], 101)])
def test_percentile_rejects(values, q):
    with pytest.raises(ValueError):
        percentile(values, q)


def test_spread_counts_pods_over_90_percent():
    s = spread([0.5, 0.95, 0.9, 1.2, 0.1])
    assert (s.max, s.over_90, s.p50) == (1.2, 2, 0.9)
    assert spread([]) is None


def _pod(i: int, mem: float, cpu: float = 0.5) -> PodSample:
    return PodSample(f"p-{i}", i, cpu, 1.0, mem, 1.0)


@pytest.mark.parametrize(
    "n_pods, highest, middle, lowest",
    [
        (0, [], [], []),
        (2, ["p-1"], ["p-0"], []),
        (9, ["p-8", "p-7", "p-6"], ["p-5", "p-4", "p-3"], ["p-2", "p-1", "p-0"]),
        (500, ["p-499", "p-498", "p-497"], ["p-250", "p-249", "p-248"], ["p-2", "p-1", "p-0"]),
    ],
)
def test_bands_are_fixed_size_most_loaded_first(n_pods, highest, middle, lowest):
    pods = [_pod(i, mem=i / 1000) for i in range(n_pods)]
    high, mid, low = bands(pods, 3)
    assert ([p.name for p in high], [p.name for p in mid], [p.name for p in low]) == (
        highest,
        middle,
        lowest,
    )


def test_summary_has_the_same_size_at_any_fleet_size():
    for n in (5, 200, 5000):
        s = summarize([_pod(i, mem=(i % 100) / 100) for i in range(n)], oom_kills=2)
        assert s.pods == n and s.oom_kills == 2
        assert len(s.highest) + len(s.middle) + len(s.lowest) <= 9


def test_pods_without_a_request_are_left_out_of_that_resource():
    s = summarize([PodSample("a", 0, 1.0, 0.0, 0.5, 1.0), PodSample("b", 1, 0.5, 1.0, 0.5, 1.0)])
    assert s.cpu is not None and s.cpu.max == 0.5  # "a" has no CPU request
    assert s.memory is not None and s.memory.p50 == 0.5


def test_oom_counts_only_the_oom_killers_reason():
    assert count_oom(["OOMKilled", "Error", None, "OOMKilled", "DisruptionTarget"]) == 2
