"""The layering rules of DESIGN 3, checked on the source: pure modules of `shared` never
import its adapters; `functions`, `worker` and `scripts` import `shared`, never each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("shared", "functions", "worker", "scripts")


def imported(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions count)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def files(top: str) -> list[Path]:
    return sorted((ROOT / top).rglob("*.py"))


@pytest.mark.parametrize(
    "path",
    [p for p in files("shared") if "adapters" not in p.parts],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_pure_shared_modules_do_not_import_adapters(path):
    assert not {m for m in imported(path) if m.startswith("shared.adapters")}


@pytest.mark.parametrize("top", TOPS)
def test_entry_points_import_shared_never_each_other(top):
    others = {t for t in TOPS if t not in (top, "shared")} | (
        {"worker", "functions", "scripts"} if top == "shared" else set()
    )
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported(path) if m.split(".")[0] in others)
        for path in files(top)
    }
    assert {k: v for k, v in offenders.items() if v} == {}
