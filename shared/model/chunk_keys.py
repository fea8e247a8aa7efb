"""Bigtable row keys of the per-chunk ledger rows (pure; no I/O).

Compatible with the predecessor (docs/job-and-worker-contract.md#ledger-rows): the key is the
2-byte blake2b digest of the chunk id as 8 big-endian bytes, followed by those 8 bytes. The
digest prefix spreads neighbouring chunks over the key space so Bigtable can split the load.

Stages other than ingest (meshing, l2cache, the migration passes) visit the same chunk ids,
so their rows carry the stage after the id (`<key>/meshing`): each stage has its own locks
and done markers, and ingest's rows stay exactly the predecessor's.
"""

from __future__ import annotations

import hashlib
import operator
from typing import SupportsIndex

__all__ = ["ROW_KEY_LENGTH", "chunk_id_from_row_key", "chunk_row_key"]

_ID_BYTES = 8
_DIGEST_BYTES = 2
ROW_KEY_LENGTH = _DIGEST_BYTES + _ID_BYTES


def _id_bytes(chunk_id: SupportsIndex) -> bytes:
    value = operator.index(chunk_id)
    if not 0 <= value < 1 << 64:
        raise ValueError(f"chunk id {value} is not an unsigned 64-bit integer")
    return value.to_bytes(_ID_BYTES, "big")


def chunk_row_key(chunk_id: SupportsIndex, stage: str = "ingest") -> bytes:
    """Row key of ``chunk_id``'s lock/done row for ``stage`` (10 bytes for ingest).

    Accepts any integer type (``int``, ``numpy.uint64``) in ``[0, 2**64)``.
    """
    raw = _id_bytes(chunk_id)
    key = hashlib.blake2b(raw, digest_size=_DIGEST_BYTES).digest() + raw
    return key if stage == "ingest" else key + b"/" + stage.encode()


def chunk_id_from_row_key(row_key: bytes) -> int:
    """Inverse of :func:`chunk_row_key`; raises ``ValueError`` for a key it did not make."""
    row_key = row_key.split(b"/", 1)[0] if len(row_key) > ROW_KEY_LENGTH else row_key
    if len(row_key) != ROW_KEY_LENGTH:
        raise ValueError(f"chunk row key must be {ROW_KEY_LENGTH} bytes, got {len(row_key)}")
    chunk_id = int.from_bytes(row_key[_DIGEST_BYTES:], "big")
    if chunk_row_key(chunk_id) != row_key:
        raise ValueError(f"row key {row_key.hex()} has the wrong digest prefix")
    return chunk_id
