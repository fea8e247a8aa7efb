"""Claim tokens that say whose they are (pure).

A token is 64 bits, as the predecessor's (kvdbclient's lock cell): the high 40 bits are the
*lineage*, a digest of the Job index the pod runs (graph, stage, layer, run, the layer's Job
attempt and index: what names the Job and the index), the low 24 bits are random per attempt
(pod). Kubernetes starts
the next attempt of an index only once the previous pod is terminal (the Job's
``podReplacementPolicy: Failed``), so a worker may take over, at once, a live claim whose
token has its own lineage: it was left by a dead attempt of its own index (SIGKILL, OOM, a
lost node) and nobody else can be computing that chunk. Without this the next attempt would
wait out the whole lock expiry.

Two attempts draw the same 24 random bits with probability 2**-24; the harness draws again if
a chunk's prior attempt carries its exact token (``worker.harness``).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping

__all__ = [
    "ATTEMPT_BITS",
    "attempt_token",
    "lineage",
    "lineage_of",
    "lineage_range",
    "takeover_enabled",
]

ATTEMPT_BITS = 24
_LINEAGE_BITS = 64 - ATTEMPT_BITS
_ATTEMPT_MASK = (1 << ATTEMPT_BITS) - 1


def lineage(
    graph_id: str, stage: str, layer: int, run_id: str, index: int, job_attempt: int = 0
) -> int:
    """The 40-bit lineage of one Job index: every pod attempt of it shares this. A re-submitted
    layer's Job (`job_attempt` > 0) has lineages of its own, so its pods never take over the
    claims of the earlier Job's pods, which may still be finishing."""
    name = f"{graph_id}\x00{stage}\x00{int(layer)}\x00{run_id}\x00{int(index)}"
    if job_attempt:
        name += f"\x00job-attempt-{int(job_attempt)}"
    digest = hashlib.blake2b(name.encode(), digest_size=8, person=b"cave-claim").digest()
    return int.from_bytes(digest, "big") >> ATTEMPT_BITS


def attempt_token(lineage_value: int, attempt_bits: int | None = None) -> int:
    """A token of ``lineage_value`` for one attempt: random low bits unless given (never 0,
    so the token is never 0 either)."""
    if not 0 <= lineage_value < 1 << _LINEAGE_BITS:
        raise ValueError(f"lineage {lineage_value} is not a {_LINEAGE_BITS}-bit value")
    low = attempt_bits if attempt_bits is not None else secrets.randbelow(_ATTEMPT_MASK) + 1
    if not 0 < low <= _ATTEMPT_MASK:
        raise ValueError(f"attempt bits {low} must be in 1..{_ATTEMPT_MASK}")
    return (lineage_value << ATTEMPT_BITS) | low


def lineage_of(token: int) -> int:
    """The lineage a token belongs to."""
    return int(token) >> ATTEMPT_BITS


def lineage_range(lineage_value: int) -> tuple[int, int]:
    """The inclusive token range of ``lineage_value`` (for a Bigtable value-range filter)."""
    low = lineage_value << ATTEMPT_BITS
    return low, low | _ATTEMPT_MASK


def takeover_enabled(env: Mapping[str, str]) -> bool:
    """``PCG_CLAIM_TAKEOVER`` (default on): whether a worker takes over the live claims of
    earlier attempts of its own index. Turn it off (``0``) only where the Job's
    ``podReplacementPolicy`` is not ``Failed`` (a replacement could then start while the
    previous pod still runs); the next attempt then waits out the lock expiry."""
    raw = env.get("PCG_CLAIM_TAKEOVER", "1").strip().lower()
    if raw not in {"0", "1", "true", "false", "yes", "no", ""}:
        raise ValueError(f"PCG_CLAIM_TAKEOVER={raw!r} must be 1 or 0")
    return raw not in {"0", "false", "no"}
