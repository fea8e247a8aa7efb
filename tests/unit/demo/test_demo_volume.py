"""demo.volume: the synthetic segmentation is deterministic and chunk-spanning."""

import numpy as np
import pytest
from scipy import ndimage

from demo.volume import generate_volume, load_volume, save_volume


def test_same_seed_same_volume_other_seed_differs():
    a = generate_volume((32, 32, 32), seed=5)
    b = generate_volume((32, 32, 32), seed=5)
    c = generate_volume((32, 32, 32), seed=6)
    assert a.dtype == np.uint32
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("size", [(32, 32, 32), (48, 40, 24), (64, 64, 64)])
def test_labels_present_and_foreground_fraction(size):
    vol = generate_volume(size, seed=1, n_labels=6)
    assert vol.shape == size
    assert set(np.unique(vol)) == set(range(7))  # background and all six labels
    assert 0.3 <= np.count_nonzero(vol) / vol.size <= 0.6


def test_objects_span_several_chunks_and_labels_have_pieces():
    vol = generate_volume((64, 64, 64), seed=2)
    chunk = 16
    spans, pieces = [], []
    for lab in range(1, 7):
        comp, n = ndimage.label(vol == lab)
        pieces.append(n)
        for obj in ndimage.find_objects(comp):
            chunks = [len(range(s.start // chunk, (s.stop - 1) // chunk + 1)) for s in obj]
            spans.append(int(np.prod(chunks)))
    assert max(spans) >= 8  # some object's bounding box covers at least 2x2x2 chunks
    assert sum(s > 1 for s in spans) >= 6  # and many cross a chunk face
    assert max(pieces) > 1  # some label is several disconnected pieces


def test_save_and_load_round_trip(tmp_path):
    vol = generate_volume((16, 12, 8), seed=3)
    path = tmp_path / "vol.npy"
    save_volume(path, vol)
    loaded = load_volume(path)
    assert isinstance(loaded, np.memmap)
    assert np.array_equal(loaded, vol)
    assert np.array_equal(load_volume(path, mmap=False), vol)


@pytest.mark.parametrize(
    "kwargs",
    [{"size": (0, 4, 4)}, {"size": (4, 4)}, {"n_labels": 0}, {"foreground": 0.95}],
)
def test_invalid_arguments(kwargs):
    args = {"size": (8, 8, 8), "seed": 0, **kwargs}
    with pytest.raises(ValueError):
        generate_volume(**args)
