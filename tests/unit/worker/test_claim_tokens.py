"""Claim tokens that say whose they are (``worker.claim_tokens``)."""

from __future__ import annotations

import pytest

from worker.claim_tokens import (
    ATTEMPT_BITS,
    attempt_token,
    lineage,
    lineage_of,
    lineage_range,
    takeover_enabled,
)

INDEX = ("graph", "ingest", 2, "run-1", 7)


@pytest.mark.parametrize(
    "other",
    [
        ("graph2", "ingest", 2, "run-1", 7),
        ("graph", "meshing", 2, "run-1", 7),
        ("graph", "ingest", 3, "run-1", 7),
        ("graph", "ingest", 2, "run-2", 7),
        ("graph", "ingest", 2, "run-1", 8),
        ("graph", "ingest", 27, "run-1", 7),  # no ambiguity from concatenation
    ],
    ids=["graph", "stage", "layer", "run", "index", "concat"],
)
def test_every_part_of_the_index_changes_the_lineage(other):
    assert lineage(*INDEX) != lineage(*other)


def test_attempts_of_one_index_share_the_lineage_and_differ():
    own = lineage(*INDEX)
    assert own == lineage(*INDEX) and 0 <= own < 1 << (64 - ATTEMPT_BITS)
    tokens = {attempt_token(own) for _ in range(200)}
    assert len(tokens) == 200
    low, high = lineage_range(own)
    assert all(low <= t <= high and lineage_of(t) == own and 0 < t < 1 << 64 for t in tokens)
    assert not low <= attempt_token(lineage(*INDEX[:-1], 8)) <= high


@pytest.mark.parametrize(
    "lineage_value, bits, expected",
    [
        (0, 1, 1),  # never 0, even for lineage 0
        (1, 1, (1 << ATTEMPT_BITS) | 1),
        ((1 << 40) - 1, (1 << ATTEMPT_BITS) - 1, (1 << 64) - 1),
    ],
)
def test_token_layout(lineage_value, bits, expected):
    assert attempt_token(lineage_value, bits) == expected


@pytest.mark.parametrize("lineage_value, bits", [(1 << 40, 1), (-1, 1), (1, 0), (1, 1 << 24)])
def test_token_out_of_range(lineage_value, bits):
    with pytest.raises(ValueError):
        attempt_token(lineage_value, bits)


@pytest.mark.parametrize(
    "raw, expected",
    [(None, True), ("1", True), ("true", True), ("0", False), ("no", False), ("FALSE", False)],
)
def test_takeover_knob(raw, expected):
    env = {} if raw is None else {"PCG_CLAIM_TAKEOVER": raw}
    assert takeover_enabled(env) is expected


def test_takeover_knob_typo_is_an_error():
    with pytest.raises(ValueError, match="PCG_CLAIM_TAKEOVER"):
        takeover_enabled({"PCG_CLAIM_TAKEOVER": "off-ish"})
