"""A Python 3.12 virtual environment with the predecessor's published harness
(`cave-pipeline[distribution]==0.0.4`, which needs Python >= 3.12), for the worker-contract
test (tests/e2e/test_pcg_harness.py) and the pod logs that test reads.

The venv is built once per machine and reused: installing it takes minutes (numpy, kvdbclient,
the Bigtable client, scipy for the demo's labelling). It lives in
``$PCG_HARNESS_VENV_ROOT`` (default ``~/.cache/cave-pipeline``), named by version, and is
marked complete only after pip succeeded, so an interrupted install is rebuilt.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

PRED_VERSION = "0.0.4"
REQUIREMENTS = (f"cave-pipeline[distribution]=={PRED_VERSION}", "scipy")
MARKER = ".complete"
# pip's words when it cannot reach a registry (as opposed to a broken requirement).
_OFFLINE = re.compile(
    r"No matching distribution|Could not find a version|NewConnectionError|"
    r"Failed to establish|Network is unreachable|Temporary failure in name resolution|"
    r"ConnectTimeout|ReadTimeout|ProxyError|Max retries exceeded",
)
# The harness's own line for a pod's window: "layer 3 batch 1: 4 chunks".
WINDOW = re.compile(r"layer (\d+) batch (\d+): (\d+) chunks\s*$")


class HarnessUnavailable(RuntimeError):
    """No Python 3.12 or no package registry here; the message says which (a skip reason)."""


def find_python312() -> str | None:
    """A Python 3.12 interpreter: pyenv's, then one on PATH (each checked by running it)."""
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = sorted(glob.glob(f"{pyenv_root}/versions/3.12*/bin/python3.12"), reverse=True)
    candidates += [p for p in (shutil.which("python3.12"),) if p]
    for path in candidates:
        try:
            out = subprocess.run(
                [path, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "True":
            return path
    return None


def harness_python(root: Path | None = None, timeout_s: float = 1500) -> Path:
    """The venv's python, building the venv first if needed; HarnessUnavailable names why
    it cannot be had (no Python 3.12, or no registry)."""
    root = Path(os.environ.get("PCG_HARNESS_VENV_ROOT", "") or root or _default_root())
    venv = root / f"pcg-harness-{PRED_VERSION}-py3.12"
    python = venv / "bin" / "python"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; others wait and reuse
        if (venv / MARKER).exists() and python.exists():
            return python
        base = find_python312()
        if base is None:
            raise HarnessUnavailable(
                "no Python 3.12 interpreter (pyenv versions/3.12*, python3.12 on PATH): the "
                f"predecessor's harness cave-pipeline=={PRED_VERSION} requires Python >= 3.12"
            )
        shutil.rmtree(venv, ignore_errors=True)
        _run([base, "-m", "venv", str(venv)], timeout_s)
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        _run([*pip, *REQUIREMENTS], timeout_s)
        (venv / MARKER).write_text(" ".join(REQUIREMENTS) + "\n")
        return python


def harness_python_or_skip() -> str:
    """The venv's python for a test, or a pytest skip naming why there is none."""
    import pytest

    try:
        return str(harness_python())
    except HarnessUnavailable as exc:
        pytest.skip(f"predecessor harness cave-pipeline=={PRED_VERSION} unavailable: {exc}")


def _default_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cave-pipeline"


def _run(argv: list[str], timeout_s: float) -> None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise HarnessUnavailable(f"{' '.join(argv)} took over {timeout_s:.0f} s") from None
    if out.returncode == 0:
        return
    tail = (out.stdout + out.stderr)[-2000:]
    if _OFFLINE.search(tail):
        raise HarnessUnavailable(f"no package registry: {' '.join(argv)} failed:\n{tail}")
    raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}):\n{tail}")


def pod_log_lines(stack_dir: Path) -> list[str]:
    """Every line the local stack's pods wrote, pod by pod: the process kubelet's CRI logs
    (`<time> <stream> <tag> <line>`) under `<stack>/kubernetes/kubelet/pods/`, kept after the
    stack stops for the pods still in the API then (a deleted pod's log goes with it)."""
    out = []
    for log in sorted((stack_dir / "kubernetes" / "kubelet" / "pods").glob("*/container.log")):
        for line in log.read_text(errors="replace").splitlines():
            parts = line.split(" ", 3)
            out.append(parts[3] if len(parts) == 4 else "")
    return out


def harness_windows(stack_dir: Path) -> dict[int, dict[int, set[int]]]:
    """{layer: {index: {window sizes}}} from the harness's lines in every pod log (one size
    per attempt; a retried index logs its window again)."""
    windows: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for line in pod_log_lines(stack_dir):
        m = WINDOW.search(line)
        if m:
            layer, index, n = map(int, m.groups())
            windows[layer][index].add(n)
    return windows


def chunk_lines(stack_dir: Path) -> list[dict]:
    """The workload's per-chunk JSON lines (``pcg_chunk``) from every pod log."""
    return [
        json.loads(line)
        for line in pod_log_lines(stack_dir)
        if line.startswith("{") and '"pcg_chunk"' in line
    ]
