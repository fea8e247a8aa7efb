"""shared.model.grid: the predecessor's public test vector, plus validation and batch-size maths."""

import numpy as np
import pytest

from shared.model import grid

# cave-pipeline 0.0.2 README, "How chunks are distributed (toy example)".
SHAPE = (8, 6, 3)
SEED = 42
B = 15

# Packed by hand (fmt: skip): one tuple per line would stretch this vector over 17 lines.
WORKER0 = [
    (0, 5, 1), (0, 3, 1), (5, 2, 0), (1, 0, 2), (2, 0, 0), (1, 1, 1), (2, 3, 1), (7, 3, 0),
    (7, 1, 0), (5, 0, 0), (5, 4, 1), (6, 3, 2), (2, 2, 1), (3, 2, 1), (3, 0, 1),
]  # fmt: skip

# Worker owning each chunk of the z=0 plane: rows y=0..5, columns x=0..7.
Z0_TABLE = """
 y=0     w9  w4  w0  w4  w6  w0  w3  w6
 y=1     w7  w1  w2  w7  w4  w5  w7  w0
 y=2     w2  w8  w6  w5  w2  w0  w3  w4
 y=3     w9  w6  w1  w3  w1  w7  w2  w0
 y=4     w9  w4  w1  w5  w1  w3  w3  w4
 y=5     w6  w4  w6  w3  w5  w2  w9  w1
"""


def _z0_expected() -> dict[tuple[int, int, int], int]:
    table = {}
    for row in Z0_TABLE.strip().splitlines():
        label, *cells = row.split()
        y = int(label.removeprefix("y="))
        for x, cell in enumerate(cells):
            table[(x, y, 0)] = int(cell.removeprefix("w"))
    return table


def test_toy_example_batch_count():
    assert grid.num_batches(SHAPE, B) == 10
    assert len(grid.batch_coords(9, SHAPE, SEED, B)) == 9  # the last batch holds 9


def test_toy_example_worker0_chunks_in_order():
    coords = grid.batch_coords(0, SHAPE, SEED, B)
    assert coords.shape == (15, 3)
    assert [tuple(c) for c in coords.tolist()] == WORKER0


def test_toy_example_z0_worker_table_from_batches():
    owner = {}
    for i in range(grid.num_batches(SHAPE, B)):
        for c in grid.batch_coords(i, SHAPE, SEED, B).tolist():
            owner[tuple(c)] = i
    expected = _z0_expected()
    assert len(expected) == 48
    assert {c: w for c, w in owner.items() if c[2] == 0} == expected


@pytest.mark.parametrize(("coord", "worker"), sorted(_z0_expected().items()))
def test_toy_example_z0_worker_table_by_inverse(coord, worker):
    assert grid.coord_to_batch_index(coord, SHAPE, SEED, B) == worker


def test_toy_example_scalar_matches_batches():
    n = 8 * 6 * 3
    flat = [grid.permute(p, n, SEED) for p in range(B)]
    assert flat == [x * 18 + y * 3 + z for x, y, z in WORKER0]
    assert [grid.unpermute(v, n, SEED) for v in flat] == list(range(B))


def test_batch_coords_dtype():
    assert grid.batch_coords(3, SHAPE, SEED, B).dtype == np.int64


def test_single_chunk_grid():
    assert grid.permute(0, 1, 7) == 0
    assert grid.unpermute(0, 1, 7) == 0
    assert grid.batch_coords(0, (1, 1, 1), 7, 5).tolist() == [[0, 0, 0]]
    assert grid.coord_to_batch_index((0, 0, 0), (1, 1, 1), 7, 5) == 0


def test_permute_many_empty_and_shape_preserved():
    assert grid.permute_many(np.array([], dtype=np.int64), 10, 1).shape == (0,)
    out = grid.permute_many(np.arange(12).reshape(3, 4), 12, 1)
    assert out.shape == (3, 4)
    assert sorted(out.ravel().tolist()) == list(range(12))


@pytest.mark.parametrize(
    ("batch_size", "layer", "expected"),
    [
        (15, 2, 15),
        (15, 3, 7),
        (15, 4, 3),
        (15, 5, 1),
        (15, 9, 1),  # never below 1
        (1, 2, 1),
        (1, 7, 1),
        (64, 2, 64),
        (64, 3, 32),
        (64, 8, 1),
        (64, 12, 1),
    ],
)
def test_layer_batch_size(batch_size, layer, expected):
    assert grid.layer_batch_size(batch_size, layer) == expected


@pytest.mark.parametrize(
    ("shape", "batch_size", "expected"),
    [
        ((8, 6, 3), 15, 10),
        ((8, 6, 3), 144, 1),
        ((8, 6, 3), 1000, 1),
        ((8, 6, 3), 1, 144),
        ((8, 6, 3), 16, 9),
        ((1, 1, 1), 1, 1),
        ((100, 100, 100), 7, 142858),
    ],
)
def test_num_batches(shape, batch_size, expected):
    assert grid.num_batches(shape, batch_size) == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: grid.permute(144, 144, 42), "position 144 is out of range: valid 0..143"),
        (lambda: grid.permute(-1, 144, 42), "position -1 is out of range: valid 0..143"),
        (lambda: grid.unpermute(200, 144, 42), "position 200 is out of range: valid 0..143"),
        (lambda: grid.permute(0, 0, 42), "chunk count 0 is out of range"),
        (lambda: grid.permute(0, -5, 42), "chunk count -5 is out of range"),
        (lambda: grid.permute(0, 2**63 + 1, 42), "chunk count 9223372036854775809"),
        (lambda: grid.permute(0, 144, -1), "seed -1 is negative"),
        (
            lambda: grid.permute_many(np.array([0, 5, 144]), 144, 42),
            "position 144 is out of range: valid 0..143",
        ),
        (
            lambda: grid.permute_many(np.array([-3, 5]), 144, 42),
            "position -3 is out of range",
        ),
        (lambda: grid.permute_many(np.array([0.5]), 144, 42), "integer array"),
        (lambda: grid.permute_many(np.array([1]), 144, -7), "seed -7 is negative"),
        (lambda: grid.unpermute_many(np.array([1]), 0, 1), "chunk count 0 is out of range"),
        (
            lambda: grid.batch_coords(10, SHAPE, SEED, B),
            "batch index 10 is past the last batch: valid 0..9 for 144 chunks at batch size 15",
        ),
        (
            lambda: grid.batch_coords(-1, SHAPE, SEED, B),
            "batch index -1 is negative: valid 0..9 for 144 chunks at batch size 15",
        ),
        (lambda: grid.batch_coords(0, SHAPE, SEED, 0), "batch size 0 is invalid"),
        (lambda: grid.batch_coords(0, SHAPE, -2, B), "seed -2 is negative"),
        (lambda: grid.batch_coords(0, (8, 0, 3), SEED, B), r"grid shape \(8, 0, 3\) is invalid"),
        (lambda: grid.batch_coords(0, (8, -6, 3), SEED, B), "grid shape"),
        (lambda: grid.batch_coords(0, (8, 6), SEED, B), r"grid shape \(8, 6\) is invalid"),
        (lambda: grid.num_batches((0, 0, 0), B), "grid shape"),
        (lambda: grid.num_batches(SHAPE, -4), "batch size -4 is invalid"),
        (lambda: grid.num_batches((2**32, 2**32, 2**32), 1), "valid up to 2\\*\\*63"),
        (
            lambda: grid.coord_to_batch_index((8, 0, 0), SHAPE, SEED, B),
            r"chunk coordinate \(8, 0, 0\) is outside the grid: valid \(0..7, 0..5, 0..2\)",
        ),
        (lambda: grid.coord_to_batch_index((0, -1, 0), SHAPE, SEED, B), "outside the grid"),
        (lambda: grid.coord_to_batch_index((0, 0), SHAPE, SEED, B), "outside the grid"),
        (lambda: grid.coord_to_batch_index((0, 0, 0), SHAPE, SEED, 0), "batch size 0"),
        (lambda: grid.layer_batch_size(0, 2), "batch size 0 is invalid"),
        (lambda: grid.layer_batch_size(15, 1), "layer 1 is invalid: chunk layers start at 2"),
    ],
)
def test_validation_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_large_seed_wraps_mod_2_64():
    # Round keys use (seed + i) mod 2^64, so seeds congruent mod 2^64 shuffle identically.
    assert [grid.permute(p, 1000, 5) for p in range(50)] == [
        grid.permute(p, 1000, 5 + 2**64) for p in range(50)
    ]
