#!/usr/bin/env bash
# Stage the Cloud Functions source into build/functions-src/ (or the directory given as $1).
#
# Cloud Functions (gen2, python312) want main.py and requirements.txt at the root of the
# source, so this lays out:
#   main.py            <- functions/main.py
#   shared/            <- the pure core, without __pycache__
#   adapters/          <- its adapters, without the local stack
#                         (adapters/local/: emulators, local cluster, stand-ins)
#   requirements.txt   <- pyproject's base `dependencies` + the `controller` extra
#
# Then it checks the staged tree: every `shared.*` and `adapters.*` module that main.py
# reaches must be there,
# and every third-party import it reaches must be covered by requirements.txt, so a broken
# deploy fails here instead of at the function's first cold start.
#
# Used by terraform (terraform/functions.tf zips this directory) and by cloudbuild.yaml.
# Idempotent: the output directory is deleted and rebuilt on every run. Needs bash, tar and
# python >= 3.11 (tomllib).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/build/functions-src}"
python="${PYTHON:-python3}"

case "$out" in
  "" | "/" | "$root" | "$root/")
    echo "stage_functions.sh: refusing to use '$out' as the output directory" >&2
    exit 2
    ;;
esac

rm -rf "$out"
mkdir -p "$out"

cp "$root/functions/main.py" "$out/main.py"
tar -C "$root" -cf - \
  --exclude='__pycache__' --exclude='*.pyc' \
  --exclude='adapters/local' \
  shared adapters | tar -C "$out" -xf -

"$python" - "$root/pyproject.toml" "$out" <<'PY'
"""Write requirements.txt from pyproject and check the staged tree's imports."""

import ast
import sys
import tomllib
from pathlib import Path

pyproject, out = Path(sys.argv[1]), Path(sys.argv[2])
project = tomllib.loads(pyproject.read_text())["project"]
reqs = [*project.get("dependencies", []), *project["optional-dependencies"]["controller"]]
reqs = [r for r in reqs if not r.replace("_", "-").lower().startswith("cave-pipeline")]
(out / "requirements.txt").write_text("".join(f"{r}\n" for r in reqs))

# Import name -> distribution that provides it (for the check below).
PROVIDERS = {
    "functions_framework": "functions-framework",
    "cloudevents": "functions-framework",  # a dependency of functions-framework
    "google": "google-",  # any google-cloud-* / google-auth distribution
    "kubernetes": "kubernetes",
    "urllib3": "kubernetes",  # a dependency of kubernetes (and google-auth's transport)
    "certifi": "kubernetes",  # a dependency of kubernetes: the public CAs of the DNS endpoint
    "numpy": "numpy",
    "yaml": "pyyaml",
    "pydantic": "pydantic",
    "kvdbclient": "kvdbclient",  # the completeness check's ledger read
    "requests": "requests",  # google-auth's AuthorizedSession: Cloud Monitoring (REST)
}
dists = [
    r.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].split("~")[0]
    .split("!")[0].strip().lower().replace("_", "-")
    for r in reqs
]


def module_file(name: str) -> Path | None:
    base = out.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


missing_modules: set[str] = set()
third_party: dict[str, list[str]] = {}
seen: set[str] = set()
todo = ["main"]
while todo:
    name = todo.pop()
    if name in seen:
        continue
    seen.add(name)
    path = module_file(name)
    if path is None:
        missing_modules.add(name)
        continue
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from shared.x import y` may name a submodule y: follow it when it is one.
            names = [node.module]
            names += [
                f"{node.module}.{a.name}"
                for a in node.names
                if module_file(f"{node.module}.{a.name}") is not None
            ]
        else:
            continue
        for full in names:
            top = full.split(".")[0]
            if top in ("shared", "adapters"):
                parts = full.split(".")
                todo.extend(".".join(parts[: i + 1]) for i in range(len(parts)))
            elif top not in sys.stdlib_module_names and top != "__future__":
                where = third_party.setdefault(top, [])
                if str(path.relative_to(out)) not in where:
                    where.append(str(path.relative_to(out)))

errors = [f"module {m} is imported but was not staged" for m in sorted(missing_modules)]
for top, files in sorted(third_party.items()):
    where = ", ".join(sorted(files))
    dist = PROVIDERS.get(top)
    if dist is None:
        errors.append(
            f"{where} imports {top!r}, which stage_functions.sh does not know: add it to "
            "PROVIDERS in scripts/stage_functions.sh (and its distribution to pyproject)"
        )
    elif not any(d.startswith(dist) for d in dists):
        errors.append(
            f"{where} imports {top!r} but requirements.txt has no {dist!r}: add it to "
            "pyproject.toml's `dependencies` (or the `controller` extra)"
        )
if errors:
    sys.exit("stage_functions.sh: the staged functions would not import:\n  " + "\n  ".join(errors))
PY

echo "staged $(find "$out" -name '*.py' | wc -l | tr -d ' ') python files into $out"
