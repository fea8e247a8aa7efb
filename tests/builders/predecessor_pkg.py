"""The predecessor's own operator code (cave-pipeline 0.0.4: config.py, manifest.py), for tests
that check this project reads its files as it did (tests/unit/config/test_predecessor_render.py).

The wheel is fetched once per machine (`pip download --no-deps`, next to the harness venv of
tests/builders/pcg_harness.py) and unpacked; its pure-Python modules import on 3.11 and 3.12
with the kubernetes client and PyYAML this project already depends on. No registry: the
caller skips (HarnessUnavailable).
"""

from __future__ import annotations

import fcntl
import importlib
import sys
import zipfile
from pathlib import Path
from types import ModuleType

from tests.builders.pcg_harness import PRED_VERSION, _default_root, _run

WHEEL = f"cave_pipeline-{PRED_VERSION}-py3-none-any.whl"


def predecessor_dir(root: Path | None = None, timeout_s: float = 300) -> Path:
    """A folder holding the unpacked `cave_pipeline` package of the predecessor."""
    root = root or _default_root()
    folder = root / f"predecessor-{PRED_VERSION}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "cave_pipeline" / "manifest.py").exists():
            return folder
        wheels = root / "wheels"
        if not (wheels / WHEEL).exists():
            _run(
                [
                    sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
                    "-q", "--no-deps", "--python-version", "3.12", "--only-binary=:all:",
                    "-d", str(wheels), f"cave-pipeline=={PRED_VERSION}",
                ],
                timeout_s,
            )  # fmt: skip
        with zipfile.ZipFile(wheels / WHEEL) as wheel:
            members = [m for m in wheel.namelist() if m.startswith("cave_pipeline/")]
            wheel.extractall(folder, members)
    return folder


def predecessor_module(name: str) -> ModuleType:
    """`cave_pipeline.<name>` of the predecessor (e.g. "config", "manifest")."""
    folder = predecessor_dir()  # HarnessUnavailable without a registry
    if str(folder) not in sys.path:
        sys.path.append(str(folder))  # appended: it never shadows this project's modules
    return importlib.import_module(f"cave_pipeline.{name}")
