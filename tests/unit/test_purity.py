"""The core (`shared/`) does no I/O: no file reads or writes, no clock, no unseeded randomness,
no environment, no processes or sockets (docs/layout.md).

What the core needs of the world it is handed: a clock (`now` arguments), a seed (a
`random.Random(seed)` of its own is fine), an observed snapshot, a port. The few places that
do read something are listed in ALLOWED with the reason, and the list may not go stale.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "shared"

# Calls that read the world, by their qualified name (imports resolved: `from time import
# monotonic` then `monotonic()` is `time.monotonic`).
CLOCK = {
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.sleep",
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "datetime.date.today",
}
RANDOM = {"uuid.uuid1", "uuid.uuid4", "os.urandom", "os.getrandom"}
ENVIRONMENT = {"os.getenv", "os.environ", "os.putenv", "os.system", "os.popen"}
FILES = {"open", "io.open", "os.open", "os.listdir", "os.scandir", "os.walk", "os.remove"}
# Any call of these modules (the global RNG, processes, sockets, secrets) except the listed.
MODULES = {"random": {"random.Random"}, "subprocess": set(), "socket": set(), "secrets": set()}
# Method names that read or write a file whatever the object (Path, importlib resources).
FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "iterdir"}

# (file under shared/, what it calls) -> why the core may.
ALLOWED: dict[tuple[str, str], str] = {
    ("config/config_files.py", ".read_text"): "reads pipeline.yml and the dataset file",
    ("config/precomputed_info.py", ".read_text"): "reads a local watershed's info file",
    ("money/pricing.py", ".read_text"): "reads the packaged rate card (shared/data)",
    ("control/controller.py", "datetime.datetime.now"): "the reconcile loop's default clock",
    ("control/triggers.py", "uuid.uuid4"): "a lease holder id per reconcile",
    ("control/outbox.py", "uuid.uuid4"): "a take holder id per publish",
    ("control/reconciler.py", "time.monotonic"): "a reconcile's own wall time, for its bill",
}


def _qualified(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = aliases.get(node.id, node.id)
    return ".".join([head, *reversed(parts)])


def io_uses(source: str) -> set[str]:
    """What `source` does of the world: qualified calls and names (`time.monotonic`,
    `os.environ`), and `.read_text`-like methods on any object."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[(a.asname or a.name).split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _qualified(node.func, aliases)
            if isinstance(node.func, ast.Attribute) and node.func.attr in FILE_METHODS:
                found.add("." + node.func.attr)
            if name is None:
                continue
            if name in CLOCK | RANDOM | ENVIRONMENT | FILES:
                found.add(name)
            top = name.split(".")[0]
            if top in MODULES and name not in MODULES[top] and "." in name:
                found.add(name)
        elif isinstance(node, ast.Attribute):
            name = _qualified(node, aliases)
            if name in ENVIRONMENT:
                found.add(name)
    return found


def _core_files() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_the_core_does_no_io():
    offenders = {}
    for path in _core_files():
        rel = str(path.relative_to(CORE))
        bad = sorted(u for u in io_uses(path.read_text()) if (rel, u) not in ALLOWED)
        if bad:
            offenders[rel] = bad
    assert offenders == {}, (
        "the core reads the world here; take the value as an argument (a clock, a seed, an "
        "observed snapshot) or do the I/O in adapters/"
    )


def test_the_allowed_reads_are_still_there():
    """An allowance whose read is gone would let the next one in unseen: drop it."""
    stale = [
        key
        for key in ALLOWED
        if not (CORE / key[0]).is_file() or key[1] not in io_uses((CORE / key[0]).read_text())
    ]
    assert stale == []


def test_the_checker_sees_io():
    """The check above would be toothless if these went unseen."""
    probe = (
        "import os, random, time, uuid\n"
        "from datetime import datetime\n"
        "from pathlib import Path\n"
        "from time import monotonic as mono\n"
        "def f(p: Path):\n"
        "    open('x')\n"
        "    p.read_text()\n"
        "    datetime.now()\n"
        "    mono()\n"
        "    time.sleep(1)\n"
        "    random.random()\n"
        "    uuid.uuid4()\n"
        "    return os.environ['HOME']\n"
    )
    assert io_uses(probe) == {
        "open",
        ".read_text",
        "datetime.datetime.now",
        "time.monotonic",
        "time.sleep",
        "random.random",
        "uuid.uuid4",
        "os.environ",
    }


def test_a_seeded_rng_and_an_injected_clock_are_pure():
    probe = (
        "import random\n"
        "def f(seed, now, monotonic):\n"
        "    rng = random.Random(seed)\n"
        "    return rng.random(), now(), monotonic()\n"
    )
    assert io_uses(probe) == set()
