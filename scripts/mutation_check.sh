#!/usr/bin/env bash
# Mutation testing of the pure core (issue 9), NOT part of CI (about 15 minutes on 2 cores).
#
# mutmut 3 (config: [tool.mutmut] in pyproject.toml) mutates shared/decide.py,
# pod_accounting.py, intervals.py, state.py, build_plan.py and setup_step.py in a copy under
# mutants/, and runs, for each mutant, the fast table tests there that cover the mutated
# function (no emulators, no simulator runs). Then prints the score per module and the surviving mutants;
# docs/testing.md#mutation-testing lists the ones judged equivalent.
#
# Usage: bash scripts/mutation_check.sh [MUTANT_NAME ...]
#   MUTMUT_CHILDREN=2  worker processes (default 2: the tests are CPU-bound)
#   KEEP=1             reuse mutants/ and its cached verdicts (default: a fresh run)
# Inspect one survivor with `mutmut show <name>`, apply it with `mutmut apply <name>`
# (then `git checkout shared/` to undo).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"

if ! command -v mutmut >/dev/null || ! mutmut --version 2>/dev/null | grep -q "version 3\."; then
    echo "installing mutmut 3 (pip install 'mutmut>=3.8,<4')" >&2
    "$python" -m pip install -q 'mutmut>=3.8,<4'
fi

[[ "${KEEP:-0}" == 1 ]] || rm -rf mutants
mkdir -p mutants
# mutmut puts mutants/ first on sys.path itself; the editable install must not win over it.
unset PYTHONPATH
started=$(date +%s)
mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@" >mutants/run.log 2>&1 || {
    tail -c 3000 mutants/run.log >&2
    echo "mutmut run failed: full output in mutants/run.log" >&2
    exit 1
}
echo "mutmut run: $(($(date +%s) - started)) s, output in mutants/run.log"

"$python" - <<'EOF'
"""Score per module from mutmut's verdict files (mutants/shared/<module>.py.meta)."""

import json
from collections import Counter
from pathlib import Path

# mutmut 3's exit codes (mutmut/stats.py): 1/3 killed, 0 survived, timeouts, no tests
KILLED, SURVIVED, NO_TESTS = {1, 3}, {0}, {5, 33}
TIMEOUT = {36, 24, -24, 152, 255}
MODULES = ("reconcile", "pod_accounting", "intervals", "state", "build_plan", "setup_step")

rows, survivors = [], []
for module in MODULES:
    meta = json.loads(Path(f"mutants/shared/{module}.py.meta").read_text())
    count = Counter()
    for name, code in meta["exit_code_by_key"].items():
        if code in KILLED:
            count["killed"] += 1
        elif code in SURVIVED:
            count["survived"] += 1
            survivors.append(name)
        elif code in TIMEOUT:
            count["timeout"] += 1
        elif code in NO_TESTS:
            count["no tests"] += 1
            survivors.append(f"{name} (no tests)")
        else:
            count["other"] += 1
        count["total"] += 1
    rows.append((module, count))

cols = ("killed", "total", "survived", "timeout", "no tests", "other")
print(f"| module | score | {' | '.join(cols)} |")
print("|" + "---|" * (len(cols) + 2))
for module, c in [*rows, ("all", sum((c for _, c in rows), Counter()))]:
    score = c["killed"] / c["total"] if c["total"] else 0.0  # killed / total
    print(f"| {module} | {score:.1%} | {' | '.join(str(c[k]) for k in cols)} |")
print(f"\nsurviving mutants ({len(survivors)}); `mutmut show NAME` for the diff:")
for name in survivors:
    print(" ", name)
EOF
