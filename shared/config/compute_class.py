"""Which Autopilot compute classes a build may name (`job.compute_class`). Pure.

Autopilot bills the general-purpose, Balanced and Scale-Out classes per pod request, which is
what every figure of this project (the Autopilot grid, packing, the forecast, the bill) is
computed from. Performance, Accelerator and custom ComputeClasses are billed per node, plus a
management premium, unless a custom class's priorities use `podFamily`, which its name cannot
show: a build on one would be billed for whole nodes the controller neither sees nor prices.
So such a class is refused while the config is loaded, as the predecessor's newest code does
(its `config.POD_BILLED_CLASSES`).
"""

from __future__ import annotations

from enum import StrEnum


class ComputeClass(StrEnum):
    """The pod-billed classes a config may name; DEFAULT is chosen by naming none."""

    DEFAULT = ""
    BALANCED = "Balanced"
    SCALE_OUT = "Scale-Out"


# The default class's own name: a pod never selects it (GKE refuses the selector), so it is
# read as DEFAULT.
GENERAL_PURPOSE_NAME = "general-purpose"


class ComputeClassError(ValueError):
    """A compute class this project cannot bill per pod; the message says why and what to use."""


def check_compute_class(value: str | None) -> str:
    """`value` as the class to select ("" for the default), or ComputeClassError naming the
    reason. A present but empty key (None) and `general-purpose` mean the default; a pod-billed
    class spelt in another case is named with its spelling (GKE's selector is case-sensitive)."""
    if value is not None and not isinstance(value, str):
        raise ComputeClassError(f"{value!r} is not a class name")
    name = (value or "").strip()
    if name.lower() == GENERAL_PURPOSE_NAME:
        return ComputeClass.DEFAULT.value
    allowed = [c.value for c in ComputeClass]
    if name in allowed:
        return name
    usable = ", ".join(repr(c) for c in allowed)
    spelt = next((c for c in allowed if c and c.lower() == name.lower()), None)
    if spelt is not None:
        raise ComputeClassError(
            f"{name!r} is spelt {spelt!r} (GKE's class names are case-sensitive)"
        )
    raise ComputeClassError(
        f"{name!r} is billed per node plus a management premium, not per pod request (unless a "
        "custom class's priorities use podFamily, which its name cannot show); the Autopilot "
        f"grid, packing and the cost figures assume per-pod billing. Use one of {usable} "
        "('' is the default, general-purpose class)"
    )
