"""The house's import contracts (pyproject.toml `[tool.importlinter]`, docs/layout.md)
hold, cover every room and top-level package, and catch an upward import.

`lint-imports` builds the import graph with grimp: lazy imports inside functions count.
tests/unit/test_layering.py keeps what grimp cannot see (module names handed to importlib).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(no_cache=True, no_logo=True))"
)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", LINT], cwd=root, env=env, capture_output=True, text=True
    )


def _contract(cid: str) -> dict:
    return next(c for c in CONFIG["contracts"] if c["id"] == cid)


def _layer_names(contract: dict) -> set[str]:
    return {
        name.strip()
        for layer in contract["layers"]
        for name in layer.replace(":", "|").split("|")
        if name.strip()
    }


def test_the_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_room_of_the_core_is_a_layer():
    rooms = {p.parent.name for p in (ROOT / "shared").glob("*/__init__.py")}
    assert _layer_names(_contract("rooms")) == rooms


def test_every_top_level_package_is_a_layer():
    packages = {
        p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in ("tests",)
    }
    assert set(CONFIG["root_packages"]) == packages
    assert _layer_names(_contract("house")) == packages


def test_an_upward_import_breaks_the_rooms_contract(tmp_path):
    """The contracts would be toothless if they passed a model module importing the
    controller (lazily, inside a function, where circles used to hide)."""
    for name in CONFIG["root_packages"]:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    intervals = tmp_path / "shared" / "model" / "intervals.py"
    intervals.write_text(
        intervals.read_text()
        + "\n\ndef _upward():\n    from shared.control import controller\n\n    return controller\n"
    )
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "The core's rooms import only the rooms below them BROKEN" in result.stdout
    assert "shared.model.intervals -> shared.control.controller" in result.stdout


def _adapter_rooms() -> set[str]:
    """The adapters' sub-packages and top-level modules (`wiring`, `chaos_mailbox`)."""
    adapters = ROOT / "adapters"
    packages = {p.parent.name for p in adapters.glob("*/__init__.py")}
    modules = {p.stem for p in adapters.glob("*.py") if p.stem != "__init__"}
    return packages | modules


def test_every_room_of_the_adapters_is_a_layer():
    assert _layer_names(_contract("adapter-rooms")) == _adapter_rooms()


def test_every_room_but_gke_is_kept_from_kubernetes():
    sources = set(_contract("only-gke-talks-to-kubernetes")["source_modules"])
    rooms = {f"adapters.{room}" for room in _adapter_rooms() - {"gke"}}
    assert sources == rooms | (set(CONFIG["root_packages"]) - {"adapters"})


def test_the_cli_is_kept_from_every_adapter_room_but_the_wiring():
    forbidden = set(_contract("cli-through-the-wiring")["forbidden_modules"])
    assert forbidden == {f"adapters.{room}" for room in _adapter_rooms() - {"wiring"}}
