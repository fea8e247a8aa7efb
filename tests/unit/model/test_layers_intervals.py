"""Layer maths and interval strings, table-driven."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.model import intervals
from shared.model.layers import children, chunk_coord, chunk_id, layer_count, layer_shape


@pytest.mark.parametrize(
    ("shape", "want"),
    [
        ((1, 1, 1), 2),
        ((2, 1, 1), 3),
        ((8, 8, 8), 5),
        ((9, 1, 1), 6),
        ((5, 3, 2), 5),
        ((1024, 512, 7), 12),
    ],
)
def test_layer_count(shape, want):
    assert layer_count(shape) == want


@pytest.mark.parametrize(
    ("shape", "layer", "want"),
    [
        ((8, 8, 8), 2, (8, 8, 8)),
        ((8, 8, 8), 3, (4, 4, 4)),
        ((5, 3, 2), 3, (3, 2, 1)),
        ((5, 3, 2), 5, (1, 1, 1)),
    ],
)
def test_layer_shape(shape, layer, want):
    assert layer_shape(shape, layer) == want


def test_layer_shape_rejects_layer_one():
    with pytest.raises(ValueError, match="layers start at 2"):
        layer_shape((2, 2, 2), 1)


@pytest.mark.parametrize(
    ("layer", "coord"),
    [
        (2, (0, 0, 0)),
        (2, (7, 7, 7)),
        (2, (1023, 5, 9)),
        (3, (3, 1, 2)),
        (4, (1, 0, 1)),
        (5, (0, 0, 0)),
    ],
)
def test_chunk_id_roundtrip_and_layer_prefix(layer, coord):
    cid = chunk_id(layer, coord, n_layers=5, spatial_bits=10)
    assert cid >> 56 == layer
    assert chunk_coord(cid, 5, 10)[2] == coord


def test_chunk_id_rejects_coords_that_do_not_fit():
    with pytest.raises(ValueError, match="does not fit"):
        chunk_id(4, (2, 0, 0), n_layers=5, spatial_bits=10)  # 1 bit per dim at layer 4


def test_children_clipped_to_grid():
    assert sorted(children((1, 0, 0), (3, 1, 1))) == [(2, 0, 0)]
    assert len(list(children((0, 0, 0), (8, 8, 8)))) == 8


@pytest.mark.parametrize(
    ("text", "values"),
    [("", []), ("0", [0]), ("1,3-5", [1, 3, 4, 5]), ("0-2,4,6,7", [0, 1, 2, 4, 6, 7])],
)
def test_interval_parse_format(text, values):
    assert intervals.parse(text) == values
    assert intervals.format(values) == text
    assert intervals.count(text) == len(values)


def test_a_range_of_two_is_still_read():
    # Kubernetes writes "6,7"; older records of ours hold "6-7": both stay readable.
    assert intervals.parse("0-2,4,6-7") == [0, 1, 2, 4, 6, 7]
    assert intervals.count("0-2,4,6-7") == 6


@pytest.mark.parametrize("bad", ["a", "3-1", "-1", "1-x"])
def test_interval_parse_errors_name_the_part(bad):
    with pytest.raises(ValueError, match="bad interval"):
        intervals.parse(bad)


@given(st.sets(st.integers(0, 10_000), max_size=300))
def test_interval_roundtrip_property(values):
    text = intervals.format(values)
    assert intervals.parse(text) == sorted(values)
    assert intervals.count(text) == len(values)


@pytest.mark.parametrize(
    ("text", "pairs", "n"),
    [("", [], 0), ("1, 3-5,,9", [(1, 1), (3, 5), (9, 9)], 5), ("0-99999", [(0, 99999)], 100000)],
)
def test_interval_ranges_and_count_without_expanding(text, pairs, n):
    assert list(intervals.ranges(text)) == pairs
    assert intervals.count(text) == n
