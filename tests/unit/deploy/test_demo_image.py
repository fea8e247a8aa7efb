"""The demo worker image holds every package the demo's pods import (a static check: no docker).

The demo's pods run `python -m worker` with `PCG_WORKLOAD` naming a demo plugin
(`demo.ingest:process_chunk`, ...), `python -m worker.setup` (which calls the plugin module's
`setup`) and `python -m demo.setup`. Following their imports (module level and inside functions,
plus module names handed to `importlib`) gives the first-party packages the image must hold.
The image holds what `cloudbuild.yaml`'s demo build passes as `PACKAGES` to worker.Dockerfile
(its default when not passed), and worker.Dockerfile must copy each of those into its source
stage and select them by `$PACKAGES`.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEMO_BUILD_STEP = "build-worker-demo"
ENTRY_MODULES = ("worker.__main__", "worker.setup", "demo.setup")


def first_party(root: Path) -> set[str]:
    """The repository's top-level packages."""
    return {p.parent.name for p in root.glob("*/__init__.py")}


def module_file(root: Path, module: str) -> Path | None:
    """The source file of a first-party module, or None."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports_of(root: Path, module: str) -> set[str]:
    """Modules one module imports: statements anywhere in it, relative ones resolved, and
    string literals handed to `importlib.import_module`."""
    path = module_file(root, module)
    if path is None:
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def packages_imported(root: Path, entries: list[str]) -> set[str]:
    """First-party top-level packages reached from the entry modules, transitively."""
    ours = first_party(root)
    seen: set[str] = set()
    pending = list(entries)
    while pending:
        module = pending.pop()
        if module in seen or module.split(".")[0] not in ours:
            continue
        seen.add(module)
        # a submodule's import runs its packages' __init__ too
        parts = module.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]
        pending += sorted(imports_of(root, module))
    return {m.split(".")[0] for m in seen}


def demo_workloads(root: Path) -> list[str]:
    """The plugin modules the demo's configs name (`workloads`), and every `demo.x:fn` the
    demo command writes."""
    cfg = yaml.safe_load((root / "examples/demo/pipeline.yml").read_text(encoding="utf-8"))
    names = {str(v).partition(":")[0] for v in (cfg.get("workloads") or {}).values()}
    for path in [*(root / "scripts").rglob("*.py"), *(root / "demo").rglob("*.py")]:
        names |= set(re.findall(r"\b(demo(?:\.\w+)+):\w+", path.read_text(encoding="utf-8")))
    return sorted(names)


def _build_args(command: str) -> tuple[str, dict[str, str]]:
    """The Dockerfile and `--build-arg`s of a `docker build` command."""
    words = shlex.split(command)
    dockerfile, args = "Dockerfile", {}
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "-f":
            dockerfile = value
        elif flag == "--build-arg":
            name, _, val = value.partition("=")
            args[name] = val
    return dockerfile, args


def demo_build(root: Path) -> tuple[str, dict[str, str]]:
    """The Dockerfile and build args of cloudbuild.yaml's demo image step."""
    build = yaml.safe_load((root / "cloudbuild.yaml").read_text(encoding="utf-8"))
    (step,) = [s for s in build["steps"] if s.get("id") == DEMO_BUILD_STEP]
    return _build_args(_docker_build(step["args"][-1]))


def _docker_build(script: str) -> str:
    """The `docker build` command of a step's script, its continued lines joined."""
    return script.split("docker build", 1)[1].replace("\\\n", " ").split("\n")[0]


def image_packages(root: Path, dockerfile: str, args: dict[str, str]) -> set[str]:
    """The packages the image holds: PACKAGES (passed, else its default) where the Dockerfile
    copies each into its source stage and selects them by $PACKAGES."""
    text = (root / dockerfile).read_text(encoding="utf-8")
    default = re.search(r'^ARG PACKAGES="?([^"\n]*)"?$', text, re.M)
    assert default, f"{dockerfile} declares no ARG PACKAGES"
    assert re.search(r"for p in \$PACKAGES", text), f"{dockerfile} does not select $PACKAGES"
    copied = set(re.findall(r"^COPY (\w+)/ all/\1/$", text, re.M))
    named = set(args.get("PACKAGES", default.group(1)).split())
    assert named <= copied, f"PACKAGES names {named - copied}, which {dockerfile} never copies"
    return named


def test_the_demo_image_holds_every_package_its_pods_import() -> None:
    dockerfile, args = demo_build(ROOT)
    held = image_packages(ROOT, dockerfile, args)
    needed = packages_imported(ROOT, [*ENTRY_MODULES, *demo_workloads(ROOT)])
    assert "demo" in needed and "shared" in needed  # the walk reached the plugins
    assert needed <= held, f"the demo image lacks {sorted(needed - held)}: pass them in PACKAGES"


def test_the_demo_image_installs_the_demo_extra() -> None:
    _, args = demo_build(ROOT)
    assert "demo" in args.get("EXTRAS", "").split(",")


def test_the_plain_worker_image_holds_only_the_harness() -> None:
    build = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text(encoding="utf-8"))
    (step,) = [s for s in build["steps"] if s.get("id") == "build-worker"]
    dockerfile, args = _build_args(_docker_build(step["args"][-1]))
    held = image_packages(ROOT, dockerfile, args)
    needed = packages_imported(ROOT, ["worker.__main__", "worker.setup"])
    assert "demo" not in needed and "worker" in needed
    assert held == needed, (
        f"the worker image holds {sorted(held)}, its pods import {sorted(needed)}"
    )


DOCKERFILE = """FROM python:3.12-slim AS source
ARG PACKAGES="shared adapters worker"
COPY shared/ all/shared/
COPY adapters/ all/adapters/
COPY worker/ all/worker/
{extra}RUN mkdir app && for p in $PACKAGES; do cp -r "all/$p" app/; done
"""


@pytest.mark.parametrize(
    ("extra", "args", "ok"),
    [
        ("COPY demo/ all/demo/\n", {"PACKAGES": "shared adapters worker demo"}, True),
        ("COPY demo/ all/demo/\n", {}, False),  # the demo build forgot PACKAGES
        # the Dockerfile never copies demo/
        ("", {"PACKAGES": "shared adapters worker demo"}, False),
    ],
)
def test_the_check_on_small_builds(tmp_path: Path, extra: str, args: dict, ok: bool) -> None:
    (tmp_path / "w.Dockerfile").write_text(DOCKERFILE.format(extra=extra), encoding="utf-8")
    needed = packages_imported(ROOT, ["demo.setup"])
    try:
        held = image_packages(tmp_path, "w.Dockerfile", args)
    except AssertionError:
        held = set()
    assert (needed <= held) is ok


def test_the_import_walk_follows_lazy_and_relative_imports(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "a/__init__.py").write_text("from .m import x\n")
    (tmp_path / "a/m.py").write_text("def f():\n    import b.n\n")
    (tmp_path / "b/__init__.py").write_text("")
    (tmp_path / "b/n.py").write_text("import importlib\nimportlib.import_module('c.k')\n")
    (tmp_path / "c/__init__.py").write_text("")
    assert packages_imported(tmp_path, ["a"]) == {"a", "b", "c"}
    assert packages_imported(tmp_path, ["b.n"]) == {"b", "c"}
