"""terraform/ parsed with python-hcl2, for the deploy tests: the merged blocks of every .tf
file (`TF`) with python-hcl2's quoting and bookkeeping removed, and lookups into them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

hcl2 = pytest.importorskip("hcl2", reason="python-hcl2 is in the dev extra")

TERRAFORM = Path(__file__).resolve().parents[2] / "terraform"


def _clean(value: Any) -> Any:
    """python-hcl2's output without its quoting and bookkeeping: `"x"` -> `x`."""
    if isinstance(value, dict):
        return {
            _clean(k): _clean(v)
            for k, v in value.items()
            if k not in ("__is_block__", "__comments__", "__inline_comments__")
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, str) and value in _KEYWORDS:
        # python-hcl2 8 sometimes gives a bare keyword as its text (seen in CI: `default = true`
        # read as 'true'); a quoted "true" keeps its quotes above, so only a keyword lands here.
        return _KEYWORDS[value]
    return value


_KEYWORDS = {"true": True, "false": False, "null": None}


def _parse(directory: Path = TERRAFORM) -> dict[str, list[Any]]:
    merged: dict[str, list[Any]] = {}
    for path in sorted(directory.glob("*.tf")):
        with path.open() as f:
            for key, blocks in _clean(hcl2.load(f)).items():
                merged.setdefault(key, []).extend(blocks)
    return merged


TF = _parse()


def resources(kind: str, tf: dict[str, list[Any]] = TF) -> dict[str, dict[str, Any]]:
    """`{name: body}` of every resource of one type."""
    found: dict[str, dict[str, Any]] = {}
    for block in tf.get("resource", []):
        for name, body in block.get(kind, {}).items():
            found[name] = body
    return found


def all_resources(tf: dict[str, list[Any]] = TF) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for block in tf.get("resource", []):
        for kind, named in block.items():
            for name, body in named.items():
                yield kind, name, body


def local(name: str, tf: dict[str, list[Any]] = TF) -> Any:
    for block in tf.get("locals", []):
        if name in block:
            return block[name]
    raise KeyError(name)


def variable_default(name: str, tf: dict[str, list[Any]] = TF) -> Any:
    for block in tf.get("variable", []):
        if name in block:
            return block[name]["default"]
    raise KeyError(name)


def one(block: Any) -> dict[str, Any]:
    """A nested block (python-hcl2 gives a list of one)."""
    if isinstance(block, list):
        assert len(block) == 1, block
        return block[0]
    return block


def rendered(template: str, kind: str = "") -> str:
    """A terraform string with its `${local.NAME}` (plain-string locals) and `${each.key}`
    interpolations done and its escapes undone: the filter Cloud Logging receives."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name == "each.key":
            assert kind, "a per-kind template rendered without a kind"
            return kind
        if name.startswith("local."):
            value = local(name.removeprefix("local."))
            assert isinstance(value, str) and "${" + name + "}" not in value
            return rendered(value, kind)
        raise AssertionError(f"cannot render ${{{name}}}")

    text = re.sub(r"(?<!\$)\$\{([a-z_.]+)\}", sub, template)
    return text.replace('\\"', '"')
