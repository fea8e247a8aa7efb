"""The layering rules (docs/architecture.md#layering-rules), checked on the source.

- `shared` imports none of `demo`, `functions`, `worker`, `scripts`: not by an import
  statement, and not at run time by a module name handed to `importlib` or `__import__`;
- the modules of `shared` (the pure core; its adapters are the top-level `adapters`)
  never import the adapters, a Google or Kubernetes client, `scipy` or `kvdbclient`;
- only `adapters/gke/` talks to the Kubernetes API (imports `kubernetes`);
- `functions`, `worker` and `scripts` never import each other; `demo` is a plugin on top of
  `shared` and `worker` that nothing but `scripts` (the demo command) imports;
- test modules import only `tests.builders` and `tests.conftest`, never one another.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "adapters", "functions", "worker", "scripts", "demo")
# Who may import whom, besides itself. `demo` is a workload: the worker loads it by the name in
# the config (never by import), and only the demo command and its oracles import it.
ALLOWED = {
    "shared": set(),
    "adapters": {"shared"},
    "functions": {"shared", "adapters"},
    "worker": {"shared", "adapters"},
    "scripts": {"shared", "adapters", "demo"},
    "demo": {"shared", "adapters", "worker"},
}
# Libraries the pure core must not reach (I/O clients, heavy numerics for the demo).
CLIENT_LIBRARIES = ("google", "kubernetes", "kvdbclient", "scipy", "grpc", "functions_framework")
LOADERS = {"import_module", "__import__", "find_spec", "import_from_path"}


def imported(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions count), plus
    every string literal handed to a run-time loader (`importlib.import_module("x")`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in LOADERS:
                names.update(
                    arg.value
                    for arg in node.args[:1]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                )
    return names


def files(top: str) -> list[Path]:
    return sorted((ROOT / top).rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("top", PACKAGES)
def test_packages_import_only_what_they_may(top):
    forbidden = set(PACKAGES) - ALLOWED[top] - {top}
    offenders = {
        _rel(path): sorted(m for m in imported(path) if m.split(".")[0] in forbidden)
        for path in files(top)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize(
    "path", [p for p in files("shared") if "adapters" not in p.parts], ids=_rel
)
def test_pure_shared_modules_import_no_adapter_or_client(path):
    bad = {m for m in imported(path) if m.split(".")[0] in ("adapters", *CLIENT_LIBRARIES)}
    assert not bad


def test_only_the_gke_adapter_talks_to_kubernetes():
    users = {
        _rel(path)
        for top in PACKAGES
        for path in files(top)
        if any(m.split(".")[0] == "kubernetes" for m in imported(path))
    }
    assert users and all(u.startswith("adapters/gke/") for u in users), users


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
    """The rule above would be toothless if a string-named import went unseen."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib\n"
        "def f():\n"
        "    return importlib.import_module('demo.ingest')\n"
        "def g():\n"
        "    from scripts import cli\n"
    )
    assert {"demo.ingest", "scripts"} <= imported(probe)
