"""Property tests for shared.model.grid: bijection, inverse, partition, vectorised == scalar."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.model import grid

# Edge sizes: tiny, powers of two and one past them (the cycle-walk worst case), odd sizes.
EDGE_NS = sorted(
    {1, 2, 3, 5, 7, 100, 144, 1000}
    | {2**k for k in range(1, 13)}
    | {2**k + 1 for k in range(1, 13)}
    | {2**k - 1 for k in range(2, 13)}
)

seeds = st.integers(min_value=0, max_value=2**64 - 1)
fast = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("n", EDGE_NS)
def test_bijection_edge_sizes(n):
    for seed in (0, 42, 2**63 + 11):
        values = grid.permute_many(np.arange(n), n, seed)
        assert np.array_equal(np.sort(values), np.arange(n))
        assert np.array_equal(grid.unpermute_many(values, n, seed), np.arange(n))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 9, 17, 144])
def test_scalar_bijection_and_inverse_edge_sizes(n):
    values = [grid.permute(p, n, 7) for p in range(n)]
    assert sorted(values) == list(range(n))
    assert [grid.unpermute(v, n, 7) for v in values] == list(range(n))


@fast
@given(n=st.integers(min_value=1, max_value=5000), seed=seeds)
def test_bijection_random_sizes(n, seed):
    values = grid.permute_many(np.arange(n), n, seed)
    assert np.array_equal(np.sort(values), np.arange(n))


@fast
@given(data=st.data(), n=st.integers(min_value=1, max_value=2**63), seed=seeds)
def test_unpermute_inverts_permute(data, n, seed):
    pos = data.draw(st.integers(min_value=0, max_value=n - 1))
    value = grid.permute(pos, n, seed)
    assert 0 <= value < n
    assert grid.unpermute(value, n, seed) == pos
    assert grid.permute(grid.unpermute(pos, n, seed), n, seed) == pos


@fast
@given(
    n=st.one_of(
        st.integers(min_value=1, max_value=5000),
        st.sampled_from([10**9, 2**40 + 1, 2**62, 2**63 - 1, 2**63]),
    ),
    seed=seeds,
    rand_seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_permute_many_matches_scalar(n, seed, rand_seed):
    rng = np.random.default_rng(rand_seed)
    positions = rng.integers(0, n, size=200, dtype=np.uint64 if n > 2**62 else np.int64)
    many = grid.permute_many(positions, n, seed)
    assert many.dtype == np.int64
    assert many.tolist() == [grid.permute(int(p), n, seed) for p in positions]
    back = grid.unpermute_many(many, n, seed)
    assert back.tolist() == [int(p) for p in positions]


def test_permute_many_matches_scalar_at_1e9_window():
    n, seed = 10**9, 42
    positions = np.arange(123_456_789, 123_456_789 + 3000)
    assert grid.permute_many(positions, n, seed).tolist() == [
        grid.permute(int(p), n, seed) for p in positions
    ]


shapes = st.tuples(*[st.integers(min_value=1, max_value=12)] * 3)


@fast
@given(shape=shapes, seed=seeds, batch_size=st.integers(min_value=1, max_value=50))
def test_batches_partition_grid(shape, seed, batch_size):
    n = shape[0] * shape[1] * shape[2]
    nb = grid.num_batches(shape, batch_size)
    batches = [grid.batch_coords(i, shape, seed, batch_size) for i in range(nb)]
    assert all(len(b) == batch_size for b in batches[:-1])
    assert 1 <= len(batches[-1]) <= batch_size
    coords = np.concatenate(batches)
    assert coords.shape == (n, 3)
    assert (coords >= 0).all() and (coords < np.array(shape)).all()
    # Every chunk in exactly one batch.
    assert len({tuple(c) for c in coords.tolist()}) == n


@fast
@given(shape=shapes, seed=seeds, batch_size=st.integers(min_value=1, max_value=50), data=st.data())
def test_coord_to_batch_index_inverts_batch_coords(shape, seed, batch_size, data):
    index = data.draw(st.integers(min_value=0, max_value=grid.num_batches(shape, batch_size) - 1))
    for coord in grid.batch_coords(index, shape, seed, batch_size).tolist():
        assert grid.coord_to_batch_index(tuple(coord), shape, seed, batch_size) == index


@fast
@given(
    shape=st.tuples(*[st.integers(min_value=1, max_value=2**20)] * 3),
    seed=seeds,
    batch_size=st.integers(min_value=1, max_value=64),
    data=st.data(),
)
def test_coord_to_batch_index_inverts_batch_coords_large_grids(shape, seed, batch_size, data):
    index = data.draw(st.integers(min_value=0, max_value=grid.num_batches(shape, batch_size) - 1))
    coords = grid.batch_coords(index, shape, seed, batch_size)
    assert (coords < np.array(shape)).all()
    for coord in coords.tolist()[:8]:
        assert grid.coord_to_batch_index(tuple(coord), shape, seed, batch_size) == index
