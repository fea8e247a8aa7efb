"""Row keys of the per-chunk ledger rows (predecessor-compatible,
docs/job-and-worker-contract.md#ledger-rows)."""

import hashlib

import numpy as np
import pytest

from shared.model.chunk_keys import ROW_KEY_LENGTH, chunk_id_from_row_key, chunk_row_key

LITERAL = {0: "4e560000000000000000", 1: "b0d70000000000000001"}
IDS = [0, 1, 2, 255, 256, 2**32 + 7, 0x0123456789ABCDEF, 2**63, 2**64 - 1]


@pytest.mark.parametrize("chunk_id", IDS)
def test_layout(chunk_id: int) -> None:
    key = chunk_row_key(chunk_id)
    assert len(key) == ROW_KEY_LENGTH == 10
    assert key[2:] == chunk_id.to_bytes(8, "big")
    assert key[:2] == hashlib.blake2b(key[2:], digest_size=2).digest()
    assert chunk_id_from_row_key(key) == chunk_id


@pytest.mark.parametrize(
    ("chunk_id", "expected_hex"),
    [
        # computed independently: hashlib.blake2b(bytes.fromhex(id_hex), digest_size=2)
        (0, hashlib.blake2b(bytes(8), digest_size=2).hexdigest() + "0000000000000000"),
        (
            0x0123456789ABCDEF,
            hashlib.blake2b(bytes.fromhex("0123456789abcdef"), digest_size=2).hexdigest()
            + "0123456789abcdef",
        ),
    ],
)
def test_vectors(chunk_id: int, expected_hex: str) -> None:
    assert chunk_row_key(chunk_id).hex() == expected_hex


def test_literal_vectors() -> None:
    # frozen values, so a change of hash or byte order cannot go unnoticed
    assert chunk_row_key(0).hex() == LITERAL[0]
    assert chunk_row_key(1).hex() == LITERAL[1]


def test_accepts_numpy_ids() -> None:
    assert chunk_row_key(np.uint64(2**64 - 1)) == chunk_row_key(2**64 - 1)


@pytest.mark.parametrize("bad", [-1, 2**64])
def test_rejects_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match="64-bit"):
        chunk_row_key(bad)


def test_rejects_foreign_keys() -> None:
    key = chunk_row_key(42)
    with pytest.raises(ValueError, match="digest"):
        chunk_id_from_row_key(bytes([key[0] ^ 1]) + key[1:])
    with pytest.raises(ValueError, match="10 bytes"):
        chunk_id_from_row_key(key[1:])


def test_other_stages_have_their_own_rows_and_ingest_keeps_the_predecessors():
    cid = 0x0200000000000001
    ingest = chunk_row_key(cid)
    assert chunk_row_key(cid, "ingest") == ingest and len(ingest) == 10
    assert chunk_row_key(cid, "meshing") == ingest + b"/meshing"
    assert len({chunk_row_key(cid, s) for s in ("ingest", "meshing", "l2cache", "migrate")}) == 4
    assert chunk_id_from_row_key(chunk_row_key(cid, "l2cache")) == cid
