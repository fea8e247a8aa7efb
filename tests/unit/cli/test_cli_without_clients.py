"""`pip install '.[cli]'` has no Google, Kubernetes or plotting clients: `pipeline` must still
import, and every command that needs no service must run. Checked in a subprocess whose
imports of those packages fail, as they would in that venv."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders.demo_configs import demo_config_file

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "examples" / "demo" / "pipeline.yml"
# Packages of the other extras (controller, worker, demo, report).
ABSENT = ("google", "kubernetes", "functions_framework", "grpc", "kvdbclient", "scipy", "plotly")
RUNNER = f"""
import importlib.abc, runpy, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {ABSENT!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the cli extra)")
sys.meta_path.insert(0, Absent())
sys.argv = ["pipeline", *sys.argv[1:]]
runpy.run_module("scripts.cli", run_name="__main__")
"""


@pytest.mark.parametrize(
    "args, out",
    [
        (["--help"], "undeploy"),
        (["validate", "-c", "pipeline.yml"], "ok (graph demo"),  # demo_config_file's
        (["locate", "-c", str(DEMO), "2", "0", "0", "0"], "-> batch"),
        (["batch", "-c", str(DEMO), "2", "0"], "batch 0:"),
        (["render", "-c", str(DEMO), "ingest", "2"], "kind: Job"),
        (["sample", "-c", str(DEMO), "ingest", "2", "2"], "completions: 2"),
        (["demo", "data", "--help"], "DIR"),
    ],
)
def test_commands_without_services_run_with_only_the_cli_extra(tmp_path, args, out):
    demo_config_file(tmp_path)  # pipeline.yml with a watershed, in the folder it runs in
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *args],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert out in done.stdout


def test_the_runner_does_hide_the_clients(tmp_path):
    """The check above can fail: a command that needs a client says which is missing."""
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "local", "up", "--state-dir", str(tmp_path / "s")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "not in the cli extra" in done.stderr


def test_doctor_names_the_extra_it_needs(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "doctor", "-c", str(DEMO)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "cave-pipeline[controller]" in done.stderr
    assert "Traceback" not in done.stderr
