"""Index-interval strings as Kubernetes writes them in a Job's status: "1,3-5,9".

`completedIndexes` and `failedIndexes` of an Indexed Job use this form; so do our stored
layer records and alerts. Kubernetes compresses only three or more consecutive indexes into a
range ("0-2"); two consecutive ones stay apart ("0,1"). `parse` reads both, and ranges of two
("0-1") as well. Pure module (see docs/local-cluster.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator


def parse(text: str) -> list[int]:
    """Expand "1,3-5" into [1, 3, 4, 5]. Raises ValueError naming the bad part."""
    out: list[int] = []
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a, b = (int(lo), int(hi)) if sep else (int(lo), int(lo))
        except ValueError:
            raise ValueError(f"bad interval {part!r} in {text!r}: expected N or N-M") from None
        if a < 0 or b < a:
            raise ValueError(f"bad interval {part!r} in {text!r}: need 0 <= N <= M")
        out.extend(range(a, b + 1))
    return out


def format(indexes: Iterable[int]) -> str:  # noqa: A001 - mirrors parse()
    """Compress indexes into "1,3-5" form (sorted, deduplicated) as the Job controller writes
    them: a range from three consecutive indexes on, so 0 and 1 are "0,1", 0 to 2 "0-2"."""
    values = sorted(set(int(i) for i in indexes))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{values[i]}-{values[j]}")
        else:  # one index, or two consecutive ones: Kubernetes writes them apart
            parts.extend(str(v) for v in values[i : j + 1])
        i = j + 1
    return ",".join(parts)


def ranges(text: str) -> Iterator[tuple[int, int]]:
    """The (first, last) pairs of an interval string, in order, without expanding them."""
    for part in (text or "").split(","):
        part = part.strip()
        if part:
            lo, sep, hi = part.partition("-")
            yield (int(lo), int(hi)) if sep else (int(lo), int(lo))


_RANGE = re.compile(r"(\d+)\s*-\s*(\d+)")


def count(text: str) -> int:
    """Number of indexes in an interval string, without expanding it. Linear in the string
    at C speed: a fragmented layer of 100,000 batches has tens of thousands of intervals."""
    if not text:
        return 0
    singles = sum(1 for part in text.split(",") if part.strip())
    return singles + sum(int(hi) - int(lo) for lo, hi in _RANGE.findall(text))


def join(pairs: Iterable[tuple[int, int]]) -> str:
    """The interval string of (first, last) pairs already in order: the inverse of
    :func:`ranges`, for runs too long to expand into :func:`format`."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in pairs)
