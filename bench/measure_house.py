"""The house's shape, from its import graph (grimp, which import-linter is built on): per
top-level package its modules and rooms (sub-packages), the modules and floors of each room,
the import circles between modules and between rooms (0 expected), the import-linter
contracts kept and broken (`lint-imports`), and the CLI's direct adapter imports (`scripts`
importing an `adapters` module other than `adapters.wiring`). Lazy imports inside functions
and imports under `if TYPE_CHECKING:` count, as they do for import-linter.

A floor is a step of the longest import chain: a room whose modules import nothing of their
package is floor 1, a room importing only floor-1 rooms floor 2, and so on (a circle is
counted as one node).

    PYTHONPATH=$PWD python3 bench/measure_house.py shared adapters functions worker scripts demo
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

import grimp

CLI = "scripts"
WIRING = "adapters.wiring"


@dataclass(frozen=True)
class Room:
    """A sub-package (or a top-level module that is not a package) of a top-level package."""

    name: str
    modules: int


@dataclass(frozen=True)
class Package:
    """One top-level package: its modules, rooms, floors and circles."""

    name: str
    modules: int
    rooms: list[Room]
    module_floors: int
    room_floors: int
    module_circles: list[list[str]]
    room_circles: list[list[str]]


@dataclass(frozen=True)
class House:
    """Every measured package, the contracts' tally and the CLI's direct adapter imports."""

    packages: list[Package]
    contracts_kept: int
    contracts_broken: int
    cli_adapter_imports: int
    cli_adapter_files: dict[str, list[str]] = field(default_factory=dict)


def room_of(module: str, package: str) -> str:
    """The room a module lives in: `shared.model.state` -> `shared.model`; a module directly
    under the package is a room of its own (`adapters.wiring`)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else package


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def floors(edges: Mapping[str, set[str]]) -> int:
    """The longest import chain, in nodes, with each circle counted as one node."""
    component = {node: node for node in edges}
    for circle in circles(edges):
        for node in circle:
            component[node] = circle[0]
    dag: dict[str, set[str]] = {c: set() for c in component.values()}
    for node, targets in edges.items():
        for target in targets:
            if component[node] != component[target]:
                dag[component[node]].add(component[target])
    depth: dict[str, int] = {}

    def height(node: str) -> int:
        if node not in depth:
            depth[node] = 1 + max((height(t) for t in dag[node]), default=0)
        return depth[node]

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    return max((height(node) for node in dag), default=0)


def measure_package(graph: grimp.ImportGraph, package: str) -> Package:
    """Modules, rooms, floors and circles of one top-level package (imports within it)."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    inside = set(modules)
    module_edges = {m: graph.find_modules_directly_imported_by(m) & inside for m in modules}
    room_edges: dict[str, set[str]] = {}
    sizes: dict[str, int] = {}
    for module in modules:
        room = room_of(module, package)
        sizes[room] = sizes.get(room, 0) + 1
        room_edges.setdefault(room, set())
        for target in module_edges[module]:
            if room_of(target, package) != room:
                room_edges[room].add(room_of(target, package))
    return Package(
        name=package,
        modules=len(modules),
        rooms=[Room(name, sizes[name]) for name in sorted(sizes) if name != package],
        module_floors=floors(module_edges),
        room_floors=floors(room_edges),
        module_circles=circles(module_edges),
        room_circles=circles(room_edges),
    )


def cli_adapter_imports(graph: grimp.ImportGraph) -> dict[str, list[str]]:
    """Per `scripts` module, the `adapters` modules other than the wiring it imports."""
    found: dict[str, list[str]] = {}
    for module in sorted(m for m in graph.modules if m == CLI or m.startswith(CLI + ".")):
        targets = sorted(
            t
            for t in graph.find_modules_directly_imported_by(module)
            if (t == "adapters" or t.startswith("adapters.")) and t != WIRING
        )
        if targets:
            found[module] = targets
    return found


def contracts() -> tuple[int, int]:
    """`lint-imports`' tally: (kept, broken)."""
    script = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(no_cache=True, no_logo=True))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True).stdout
    tally = next((line for line in out.splitlines() if line.startswith("Contracts:")), "")
    words = tally.replace(",", "").replace(".", "").split()
    number = {words[i + 1]: int(words[i]) for i in range(len(words) - 1) if words[i].isdigit()}
    return number.get("kept", 0), number.get("broken", 0)


def measure(packages: Iterable[str]) -> House:
    """The whole measure over `packages` (all of them in one graph, external ones too)."""
    names = list(packages)
    graph = grimp.build_graph(*names, include_external_packages=True, cache_dir=None)
    measured = [measure_package(graph, name) for name in names]
    kept, broken = contracts()
    cli = cli_adapter_imports(graph) if CLI in names else {}
    return House(measured, kept, broken, sum(len(v) for v in cli.values()), cli)


def print_house(house: House) -> None:
    """A plain-text summary, one block per package."""
    for package in house.packages:
        print(
            f"{package.name}: {package.modules} modules, {len(package.rooms)} rooms, "
            f"{package.module_floors} module floors, {package.room_floors} room floors, "
            f"{len(package.module_circles)} module circles, "
            f"{len(package.room_circles)} room circles"
        )
        for room in package.rooms:
            print(f"  {room.name}: {room.modules} modules")
        for circle in package.module_circles + package.room_circles:
            print(f"  circle: {' <-> '.join(circle)}")
    print(f"contracts: {house.contracts_kept} kept, {house.contracts_broken} broken")
    print(
        f"the CLI's direct adapter imports: {house.cli_adapter_imports} "
        f"in {len(house.cli_adapter_files)} files"
    )
    for module, targets in house.cli_adapter_files.items():
        print(f"  {module}: {', '.join(targets)}")


def main(argv: list[str] | None = None) -> int:
    """Measure the packages named on the command line; `--json` adds a final JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    house = measure(args.packages)
    print_house(house)
    if args.json:
        print(json.dumps(asdict(house)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
