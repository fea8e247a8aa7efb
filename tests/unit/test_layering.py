"""What the import contracts cannot see, checked on the source: pyproject.toml's
`[tool.importlinter]` contracts are the one rule book for imports (lint-imports builds its
graph from import statements; tests/unit/test_import_contracts.py runs it), and this keeps
to what grimp misses:

- a module name handed to a run-time loader (`importlib.import_module("demo.ingest")`) names
  only its own package or one in a lower layer of the house contract;
- test modules import only `tests.builders` and `tests.conftest`, never one another (the
  tests are no package of the contracts).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMPORTLINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
PACKAGES = tuple(IMPORTLINTER["root_packages"])
LOADERS = {"import_module", "__import__", "find_spec", "import_from_path"}


def below(package: str) -> set[str]:
    """The packages in lower layers of the house contract than `package`'s."""
    house = next(c for c in IMPORTLINTER["contracts"] if c["id"] == "house")
    layers = [{n.strip() for n in layer.split("|")} for layer in house["layers"]]
    at = next(i for i, layer in enumerate(layers) if package in layer)
    return set().union(*layers[at + 1 :])


def loaded(path: Path) -> set[str]:
    """The string literals a file hands to a run-time loader (`importlib.import_module`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in LOADERS:
                names.update(
                    arg.value
                    for arg in node.args[:1]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                )
    return names


def imported(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions count), plus
    every string literal handed to a run-time loader."""
    names = loaded(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def files(top: str) -> list[Path]:
    return sorted((ROOT / top).rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("top", PACKAGES)
def test_runtime_loaders_name_only_lower_packages(top):
    allowed = below(top) | {top}
    offenders = {
        _rel(path): sorted(m for m in loaded(path) if m.split(".")[0] not in allowed)
        for path in files(top)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_lower_packages_follow_the_house_contract():
    """The loader rule reads the house's layers: shared is at the bottom, the entry points on
    top (a reordered contract would change what the rule allows)."""
    assert below("shared") == set()
    assert below("scripts") == {"demo", "worker", "adapters", "shared"}


def test_test_modules_import_only_builders_and_conftest():
    offenders = {
        _rel(path): sorted(
            m
            for m in imported(path)
            if m.startswith("tests.") and not m.startswith(("tests.builders", "tests.conftest"))
        )
        for path in files("tests")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_checker_sees_runtime_loading(tmp_path):
    """The rules above would be toothless if a string-named import went unseen."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib\n"
        "def f():\n"
        "    return importlib.import_module('demo.ingest')\n"
        "def g():\n"
        "    from scripts import cli\n"
    )
    assert loaded(probe) == {"demo.ingest"}
    assert {"demo.ingest", "scripts"} <= imported(probe)
