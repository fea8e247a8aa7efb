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
