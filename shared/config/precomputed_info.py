"""The volume size of a precomputed watershed, from its `info` file.

PyChunkedGraph takes a graph's grid from its watershed's bounds (mip 0), so a dataset file in
the predecessor's shape has no `data_source.size`. This reads local (`file://` or a plain
path) info files, and remote ones through the reader registered for their scheme
(`register_info_reader`: `adapters.google.info_reader` registers `gs`, and the CLI
imports it); for any other location, or an unreadable one, `GridUnreadable` says so and the
caller names `data_source.size` as the way out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

# scheme -> a function reading that location's info document (raises GridUnreadable)
_REMOTE_READERS: dict[str, Callable[[str], dict[str, Any]]] = {}


class GridUnreadable(ValueError):
    """The watershed's size could not be read; the message says why."""


class GridUnreachable(GridUnreadable):
    """The watershed's `info` is remote and its service did not answer (no network, DNS, a
    timeout): reading it again later may work."""


def size_from_info(info: dict[str, Any]) -> tuple[int, int, int]:
    """Voxel size (x, y, z) at mip 0 of a precomputed volume's info document."""
    try:
        size = tuple(int(v) for v in info["scales"][0]["size"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise GridUnreadable(f"info has no scales[0].size: {exc!r}") from None
    if len(size) != 3 or min(size) < 1:
        raise GridUnreadable(f"info scales[0].size {list(size)} is not 3 positive sizes")
    return size  # type: ignore[return-value]


def local_info_path(watershed: str, base: Path) -> Path | None:
    """The info file of a local watershed (`file://...`, `precomputed://file://...` or a
    path relative to `base`), or None for a remote one (gs://, s3://, http(s)://)."""
    url = watershed.removeprefix("precomputed://")
    scheme = urlparse(url).scheme
    if scheme == "file":
        parts = urlparse(url)  # file://./x parses "." as the host: keep it as a relative path
        local = Path(parts.netloc + parts.path) if parts.netloc else Path(parts.path)
        return (base / local) / "info"
    if scheme:
        return None
    return (base / url) / "info"


def register_info_reader(scheme: str, reader: Callable[[str], dict[str, Any]]) -> None:
    """Read info files of `scheme` (e.g. "gs") locations with `reader` (an adapter's)."""
    _REMOTE_READERS[scheme] = reader


def read_watershed_size(watershed: str, base: Path) -> tuple[int, int, int]:
    """The size of the watershed at `watershed` (a local precomputed volume)."""
    if not watershed:
        raise GridUnreadable("data_source.watershed is empty")
    path = local_info_path(watershed, base)
    if path is None:
        scheme = urlparse(watershed.removeprefix("precomputed://")).scheme
        reader = _REMOTE_READERS.get(scheme)
        if reader is None:
            known = ", ".join(f"{s}://" for s in ("file", *sorted(_REMOTE_READERS)))
            raise GridUnreadable(f"{watershed}: only {known} info files are read here")
        return size_from_info(reader(watershed))
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        raise GridUnreadable(f"{path} not found") from None
    except (OSError, ValueError) as exc:
        raise GridUnreadable(f"{path} unreadable: {exc}") from None
    if not isinstance(info, dict):
        raise GridUnreadable(f"{path} is not a JSON object")
    return size_from_info(info)
