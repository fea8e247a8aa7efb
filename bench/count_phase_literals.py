"""Count string-literal phase and status comparisons in the code (issue 29's figure).

A comparison counts when one side is a name or attribute ending in `phase` or `status`
(`ls.phase`, `setup_phase`, `run.status`) and the other a str constant or a tuple, set or list
of str constants (`ls.phase == "running"`, `status in ("succeeded", "failed")`). Comparisons
with an enum member (`ls.phase == Phase.RUNNING`) do not count. Kubernetes' own pod phases
("Running", "Pending", ...) and HTTP statuses count too, as the rule cannot tell them apart;
the `pipeline` column counts only the comparisons whose strings are all the pipeline's own
phases and statuses (waiting, running, paused, succeeded, failed, done, "").

    python bench/count_phase_literals.py            # shared adapters functions scripts worker demo
    python bench/count_phase_literals.py --list     # and every comparison, file:line
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "adapters", "functions", "scripts", "worker", "demo")
PIPELINE_STRINGS = frozenset({"waiting", "running", "paused", "succeeded", "failed", "done", ""})


def _is_phase_side(node: ast.expr) -> bool:
    """A name or attribute whose name ends in `phase` or `status`."""
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    else:
        return False
    return name.lower().endswith(("phase", "status"))


def _literal_strings(node: ast.expr) -> list[str] | None:
    """The str constants of `node` (one, or a tuple/set/list of them); None if it is not that."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.Set | ast.List) and node.elts:
        out = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(out) == len(node.elts) and all(isinstance(v, str) for v in out):
            return out
    return None


def literal_comparisons(source: str) -> list[tuple[int, list[str]]]:
    """Each counted comparison of `source`: its line and the strings it compares against."""
    found: list[tuple[int, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for left, right in zip(sides, sides[1:], strict=False):
            for a, b in ((left, right), (right, left)):
                strings = _literal_strings(b)
                if strings is not None and _is_phase_side(a):
                    found.append((node.lineno, strings))
                    break
    return sorted(found)


def count(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, dict]:
    """Per package: every counted comparison (`all`), the pipeline-only ones, and the list."""
    out: dict[str, dict] = {}
    for package in packages:
        hits: list[str] = []
        pipeline = 0
        for path in sorted((root / package).rglob("*.py")):
            for line, strings in literal_comparisons(path.read_text()):
                hits.append(f"{path.relative_to(root)}:{line} {strings}")
                pipeline += all(s in PIPELINE_STRINGS for s in strings)
        out[package] = {"all": len(hits), "pipeline": pipeline, "hits": hits}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every comparison")
    args = parser.parse_args()
    counts = count()
    print(f"{'package':<10} {'all':>5} {'pipeline':>9}")
    for package, c in counts.items():
        print(f"{package:<10} {c['all']:>5} {c['pipeline']:>9}")
        if args.list:
            for hit in c["hits"]:
                print(f"    {hit}")
    total = sum(c["all"] for c in counts.values())
    pipeline = sum(c["pipeline"] for c in counts.values())
    print(f"{'total':<10} {total:>5} {pipeline:>9}")
    print(json.dumps({"total": total, "pipeline": pipeline}))


if __name__ == "__main__":
    main()
