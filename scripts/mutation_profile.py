"""Helpers of scripts/mutation_check.sh (docs/testing-mutation.md).

    python scripts/mutation_profile.py PYPROJECT PROFILE   # a pyproject.toml for PROFILE
    python scripts/mutation_profile.py --emulators FILE    # start emulators, env to FILE
    python scripts/mutation_profile.py --score [PATTERN..] # score per module from mutants/

The first prints pytest's settings and ``[tool.mutation_profiles.PROFILE]`` as
``[tool.mutmut]`` (mutmut 3 reads only that table of ./pyproject.toml). The second starts one
set of emulators and writes their client env vars to FILE as JSON (the tests reuse them
through ``PCG_TEST_EMULATOR_ENV``), then waits for SIGTERM. The third reads mutmut's verdict
files for the modules of ./pyproject.toml's ``only_mutate`` and prints killed / total per
module over the mutants matching the patterns (all when none), and the survivors.
"""

from __future__ import annotations

import fnmatch
import json
import os
import signal
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

# mutmut 3's exit codes (mutmut/stats.py): 1/3 killed, 0 survived, timeouts, no tests
KILLED, SURVIVED, NO_TESTS = {1, 3}, {0}, {5, 33}
TIMEOUT = {36, 24, -24, 152, 255}
COLUMNS = ("killed", "total", "survived", "timeout", "no tests", "other", "not run")


def profile_pyproject(pyproject: str, profile: str) -> str:
    """pytest's settings plus the profile's table as ``[tool.mutmut]``."""
    with open(pyproject, "rb") as f:
        tool = tomllib.load(f)["tool"]
    try:
        table = tool["mutation_profiles"][profile]
    except KeyError:
        raise SystemExit(f"no [tool.mutation_profiles.{profile}] in {pyproject}") from None
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in tool["pytest"]["ini_options"].items()]
    lines += ["", "[tool.mutmut]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def serve_emulators(path: str) -> None:
    """Start the emulators, write their env to ``path``, run until SIGTERM."""
    from adapters.local.emulators import EmulatorSet

    def stop(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    with EmulatorSet() as emus:
        tmp = f"{path}.tmp"
        Path(tmp).write_text(json.dumps(emus.env))
        os.replace(tmp, path)
        while True:
            time.sleep(3600)


def score(patterns: list[str]) -> str:
    """The score table and the survivors, from mutants/<path>.meta."""
    with open("pyproject.toml", "rb") as f:
        files = tomllib.load(f)["tool"]["mutmut"]["only_mutate"]
    rows, survivors = [], []
    for path in files:
        meta = json.loads(Path(f"mutants/{path}.meta").read_text())
        count: Counter[str] = Counter()
        for name, code in meta["exit_code_by_key"].items():
            if patterns and not any(fnmatch.fnmatch(name, p) for p in patterns):
                continue
            if code is None:  # a run stopped before it (not in the total)
                count["not run"] += 1
                continue
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
        rows.append((Path(path).stem, count))
    out = [f"| module | score | {' | '.join(COLUMNS)} |", "|" + "---|" * (len(COLUMNS) + 2)]
    for module, c in [*rows, ("all", sum((c for _, c in rows), Counter()))]:
        rate = c["killed"] / c["total"] if c["total"] else 0.0  # killed / total
        out.append(f"| {module} | {rate:.1%} | {' | '.join(str(c[k]) for k in COLUMNS)} |")
    out.append(f"\nsurviving mutants ({len(survivors)}); `mutmut show NAME` for the diff:")
    out += [f"  {name}" for name in survivors]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--emulators"]:
        serve_emulators(argv[1])
    elif argv[:1] == ["--score"]:
        print(score(argv[1:]))
    else:
        print(profile_pyproject(argv[0], argv[1]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
