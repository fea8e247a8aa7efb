"""How often PyChunkedGraph images renew their chunk claims, and the scale that keeps the
renewal within the claim's lifetime (docs/images-chunk-lock.md, "Claim lifetime and renewal").

In those images a chunk claim lives for the kvdbclient client's lock expiry, which
``ChunkedGraph`` takes from the graph's ``graph_config.ROOT_LOCK_EXPIRY`` (3 minutes by
default), the same at every layer. The ingest worker computes
``expiry = 3 min x (L-1) x PCG_LOCK_EXPIRY_SCALE`` and renews every ``expiry / 3``; the lock
ignores that expiry. So the scale sets only the renewal interval, and it is safe when the
interval is at most a third of the lifetime: ``scale <= lifetime / (180 s x (L-1))``.
Pure module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SCALE_ENV = "PCG_LOCK_EXPIRY_SCALE"
ROOT_LOCK_EXPIRY = "ROOT_LOCK_EXPIRY"
# PyChunkedGraph's GraphConfig default for ROOT_LOCK_EXPIRY (timedelta(minutes=3)).
DEFAULT_CLAIM_LIFETIME_S = 180.0
# The ingest worker's expiry per layer above 1 (3 min x (L-1) x scale) ...
IMAGE_EXPIRY_S_PER_LAYER = 180.0
# ... and its renewal, a third of that expiry.
IMAGE_RENEWALS_PER_EXPIRY = 3
# The bound we keep: a live claim is renewed at least this many times per lifetime, so one
# slow or failed renewal does not let it lapse.
RENEWALS_PER_LIFETIME = 3
_DIGITS = 6  # the scale is written with this many decimals, rounded down


class LockRenewalError(ValueError):
    """A lifetime or scale cannot be read; the message names the key and the fix."""


@dataclass(frozen=True)
class RenewalBreach:
    """A layer whose images' renewal interval exceeds a third of the claim lifetime."""

    layer: int
    renewal_s: float
    lifetime_s: float


def claim_lifetime_s(dataset: Mapping[str, Any] | None) -> float:
    """The claim lifetime of the images in seconds: the dataset's
    ``graph_config.ROOT_LOCK_EXPIRY`` (a number of seconds) when given, else 3 minutes.

    ``dataset`` is the raw dataset mapping (the key may be absent)."""
    graph_config = (dataset or {}).get("graph_config") or {}
    raw = graph_config.get(ROOT_LOCK_EXPIRY) if isinstance(graph_config, Mapping) else None
    if raw is None:
        return DEFAULT_CLAIM_LIFETIME_S
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw > 0:
        raise LockRenewalError(
            f"graph_config.{ROOT_LOCK_EXPIRY}: {raw!r} is not a number of seconds > 0; "
            "give the claim lifetime in seconds (e.g. 180) or drop it for the 3-minute default"
        )
    return float(raw)


def check_root_lock_expiry_for_images(dataset: Mapping[str, Any] | None) -> None:
    """LockRenewalError when the dataset file the images get sets ROOT_LOCK_EXPIRY.

    PyChunkedGraph's ingest setup builds `GraphConfig(ID=..., OVERWRITE=False,
    **graph_config)` from `yaml.safe_load` of that file, converting nothing, and the value is
    used as a `timedelta` everywhere after: `lock_expiry.total_seconds()` when the Bigtable
    client is built (in the setup itself, before the graph exists), `.seconds` for write
    deadlines, `now - lock_expiry` in the lock filter. A YAML file can carry only a number or a
    string (safe_load makes no timedelta), and either fails there, so the graph is never made
    and every layer-2 pod then fails reading its metadata. The one form an image can use is
    the key's absence: its 3-minute default."""
    graph_config = (dataset or {}).get("graph_config") or {}
    if isinstance(graph_config, Mapping) and graph_config.get(ROOT_LOCK_EXPIRY) is not None:
        raw = graph_config[ROOT_LOCK_EXPIRY]
        raise LockRenewalError(
            f"graph_config.{ROOT_LOCK_EXPIRY}: {raw!r} cannot reach PyChunkedGraph's images: "
            "their ingest setup passes the dataset file's value to GraphConfig unconverted and "
            "uses it as a timedelta (lock_expiry.total_seconds() when it builds its Bigtable "
            "client), which a YAML number or string is not, so the setup fails before the graph "
            "exists. Remove it: the images' claims then live for their default 3 minutes, the "
            "lifetime the controller's lock scale and held-chunk wait assume"
        )


def image_renewal_s(layer: int, scale: float) -> float:
    """The images' renewal interval at `layer` for `scale`: (3 min x (L-1) x scale) / 3."""
    return IMAGE_EXPIRY_S_PER_LAYER * (layer - 1) * scale / IMAGE_RENEWALS_PER_EXPIRY


def safe_scale(layer: int, lifetime_s: float) -> float:
    """The largest `PCG_LOCK_EXPIRY_SCALE` (6 decimals, rounded down) whose renewal interval
    at `layer` is at most a third of `lifetime_s`: lifetime / (180 s x (L-1))."""
    exact = lifetime_s / (IMAGE_EXPIRY_S_PER_LAYER * max(1, layer - 1))
    # Rounded down, so the written value never renews later than the bound.
    return math.floor(exact * 10**_DIGITS) / 10**_DIGITS


def parse_scale(raw: str) -> float:
    """An operator's `PCG_LOCK_EXPIRY_SCALE` (from `env:`) as a number > 0."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise LockRenewalError(
            f"env.{SCALE_ENV}: {raw!r} is not a number > 0; remove it (the controller sets a "
            "safe value per layer) or give a positive number"
        )
    return value


def renewal_breaches(scale: float, layers: Iterable[int], lifetime_s: float) -> list[RenewalBreach]:
    """The layers at which `scale` renews the images' claims later than a third of
    `lifetime_s` (empty when the scale is safe everywhere)."""
    bound = lifetime_s / RENEWALS_PER_LIFETIME
    return [
        RenewalBreach(layer, image_renewal_s(layer, scale), lifetime_s)
        for layer in layers
        if image_renewal_s(layer, scale) > bound + 1e-9
    ]


def override_warning(scale: float, layers: Iterable[int], lifetime_s: float) -> str | None:
    """The warning for an operator's `PCG_LOCK_EXPIRY_SCALE` that breaks the bound at some
    layer (naming each layer's renewal against the lifetime), or None when it holds."""
    breaches = renewal_breaches(scale, layers, lifetime_s)
    if not breaches:
        return None
    each = ", ".join(f"L{b.layer} renews every {_s(b.renewal_s)}" for b in breaches)
    worst = [b.layer for b in breaches if b.renewal_s >= b.lifetime_s]
    lapse = (
        f"; at {', '.join(f'L{n}' for n in worst)} a live claim lapses before it is renewed "
        "and a contender can take a chunk that is still being written"
        if worst
        else ""
    )
    return (
        f"env.{SCALE_ENV}={scale:g} (yours, kept): {each}, against a claim lifetime of "
        f"{_s(lifetime_s)} (the graph's {ROOT_LOCK_EXPIRY}, 3 min by default); the images "
        f"need a renewal at "
        f"most every {_s(lifetime_s / RENEWALS_PER_LIFETIME)}{lapse}. Remove it to get a safe "
        "scale per layer"
    )


def _s(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.3g} s"
