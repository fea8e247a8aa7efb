import pytest

from shared.views.wall_parts import UNNAMED, Part, Span, breakdown

CASES = [
    ("empty: all unnamed", [], 10.0, {UNNAMED: 10.0}),
    (
        "disjoint parts and a gap",
        [
            Span("L2", Part.ADVANCE, 0, 1),
            Span("L2", Part.STARTUP, 1, 3),
            Span("L2", Part.COMPUTE, 3, 8),
        ],
        10.0,
        {"advance": 1.0, "startup": 2.0, "compute": 5.0, UNNAMED: 2.0},
    ),
    (
        "overlap goes to compute",
        [Span("L2", Part.STARTUP, 0, 5), Span("L2", Part.COMPUTE, 2, 6)],
        6.0,
        {"startup": 2.0, "compute": 4.0},
    ),
    ("clipped to wall", [Span("L3", Part.TAIL, -1, 20)], 4.0, {"tail": 4.0}),
]


@pytest.mark.parametrize("name,spans,wall,expected", CASES, ids=[c[0] for c in CASES])
def test_breakdown(name, spans, wall, expected):
    got = breakdown(spans, wall)
    assert {k: v for k, v in got.items() if v} == expected
    assert sum(got.values()) == pytest.approx(wall)


def test_negative_wall_rejected():
    with pytest.raises(ValueError, match="wall time"):
        breakdown([], -1.0)


GAP_CASES = [
    ("none: covered", [Span("L2", Part.COMPUTE, 0, 10)], 10.0, []),
    (
        "at start, between two layers and at the end",
        [Span("L2", Part.COMPUTE, 1, 4), Span("L3", Part.ADVANCE, 6, 8)],
        10.0,
        [
            "1.0 s at start, before L2 compute",
            "2.0 s after L2 compute, before L3 advance",
            "2.0 s after L3 advance, at end",
        ],
    ),
    (
        "a span inside a longer one does not end the cover",
        [
            Span("L2", Part.TAIL, 0, 8),
            Span("L2", Part.COMPUTE, 1, 2),
            Span("L3", Part.ADVANCE, 9, 10),
        ],
        10.0,
        ["1.0 s after L2 tail, before L3 advance"],
    ),
]


@pytest.mark.parametrize("name,spans,wall,expected", GAP_CASES, ids=[c[0] for c in GAP_CASES])
def test_gaps_place_the_unnamed_part(name, spans, wall, expected):
    from shared.views.wall_parts import gaps

    found = gaps(spans, wall)
    assert [g.describe() for g in found] == expected
    assert sum(g.end - g.start for g in found) == pytest.approx(breakdown(spans, wall)[UNNAMED])
