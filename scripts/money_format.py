"""Amounts of money as operator views print them: small ones with enough precision to be
read (a demo's layer costs a ten-thousandth of a dollar), and a saving that is really an
extra cost said so."""

from __future__ import annotations

import math

MAX_DECIMALS = 6  # $0.000001: below it an amount prints as 0.000000 (a status cell's width)


def usd(value: float | None) -> str:
    """An amount in USD without the sign: whole dollars from 100, cents from 0.01, below that
    two significant digits (0.00038, 0.0000041), at most MAX_DECIMALS decimals; "?" when
    unknown."""
    if value is None:
        return "?"
    size = abs(value)
    if size >= 100:
        return f"{value:.0f}"
    if size >= 0.01 or size == 0:
        return f"{value:.2f}"
    decimals = min(MAX_DECIMALS, 1 - math.floor(math.log10(size)))
    return f"{value:.{decimals}f}"


def saving(value: float) -> str:
    """What a change does to the cost: `saves $0.0012`, `costs $0.00021 more` (a higher cost
    is not a negative saving), or `costs the same`."""
    shown = usd(abs(value))
    if value > 0 and float(shown) > 0:
        return f"saves ${shown}"
    if value < 0 and float(shown) > 0:
        return f"costs ${shown} more"
    return "costs the same"
