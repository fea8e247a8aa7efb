"""docs/cli.md#running-a-build-on-the-local-stack-by-hand, command by command, as a
newcomer types them: local up (in the background), then what it printed: demo data, setup,
start (with approve), approve, status until done, costs, report; and the same flow with every
stage. Each command runs as its own process in one folder, so the CLI finds the stack as it
would in a terminal (`.local-stack/stack.json`)."""

from __future__ import annotations

import base64
import json
import shlex
import time
from pathlib import Path

import pytest

from adapters.local.kube_api import KubeApi
from tests.builders.cli_stack import local_stack, pipeline, wait_status

RUN = "r1"
pytestmark = pytest.mark.e2e
_ = local_stack  # the fixture


def the_hint(here: Path) -> list[list[str]]:
    """The commands `pipeline local up` printed for a build by hand, each as its arguments."""
    deadline = time.monotonic() + 30  # it prints them just after writing stack.json
    while "Ctrl-C stops the stack" not in (log := (here / "local-up.log").read_text()):
        assert time.monotonic() < deadline, log
        time.sleep(0.2)
    assert f"in this folder ({here})" in log, log
    lines = [ln.strip() for ln in log.splitlines() if ln.startswith("  pipeline ")]
    return [shlex.split(ln)[1:] for ln in lines]


def test_the_readme_by_hand_section_builds_the_demo(local_stack: Path):
    """As a newcomer follows what `pipeline local up` printed: demo data, setup, start (in
    approve mode here), status."""
    here = local_stack
    data, setup_args, start_args, status_args = the_hint(here)
    assert data[:2] == ["demo", "data"] and status_args == ["status", RUN]
    out = pipeline(here, *data).stdout
    assert "next: pipeline setup" in out
    cfg = "demo-data/pipeline.yml"
    assert setup_args == ["setup", "-c", cfg] and start_args[:3] == ["start", "-c", cfg]
    setup = pipeline(here, *setup_args)
    assert "Warning" not in setup.stderr and "Bigtable emulator" not in setup.stderr
    # The pods' Secret, in local Kubernetes (read back as the stack's admin: the operators'
    # Role may write it, not read it): a placeholder cave-secret.json.
    assert "secret cloud-volume-secrets ready in namespace cave-pipeline" in setup.stdout
    admin = KubeApi.from_kubeconfig(here / ".local-stack" / "kubeconfig")
    secret = admin.request("GET", "/api/v1/namespaces/cave-pipeline/secrets/cloud-volume-secrets")
    assert base64.b64decode(secret["data"]["cave-secret.json"]) == b'{"token": "placeholder"}'

    pipeline(here, *start_args, "--advance", "approve")
    # Layer 2 waits on the stage's setup pass (no approval needed), then on its approval.
    deadline = time.monotonic() + 120
    while True:
        first = json.loads(pipeline(here, "status", RUN, "--json").stdout)
        waiting = {row["key"]: row["waits_on"] for row in first["layers"]}
        if not waiting["ingest-L2"].startswith(("ingest setup (waiting", "ingest setup (running")):
            break
        assert time.monotonic() < deadline, f"setup still not done after 120 s: {waiting}"
        time.sleep(1)
    assert waiting["ingest-L2"].startswith("approval: pipeline approve r1 ingest 2"), waiting
    # the forecast: every layer still to build, the run's ETA and projected cost
    assert first["eta_basis"] == "forecast" and first["eta_s"] > 0 and first["projected_usd"] > 0
    assert all(row["eta_s"] > 0 for row in first["layers"])
    assert "approved ingest-L2" in pipeline(here, "approve", RUN, "ingest").stdout
    deadline = time.monotonic() + 300
    while True:
        doc = json.loads(pipeline(here, "status", RUN, "--json").stdout)
        if doc["status"] != "running":
            break
        assert time.monotonic() < deadline, f"run still running after 300 s: {doc}"
        time.sleep(2)
    assert doc["status"] == "succeeded"
    assert doc["chunks_done"] == doc["chunks_total"] == 64 + 8 + 1  # 4^3, 2^3, 1
    screen = pipeline(here, "status", RUN, "-o").stdout
    assert "chunks 73/73 (100%)" in screen and "ingest-L4" in screen
    assert "Warning" not in screen and "warn" not in screen.lower()
    costs = pipeline(here, "costs", RUN).stdout
    assert "ingest" in costs and "total" in costs
    breakdown = json.loads(pipeline(here, "run", RUN, "--json").stdout)
    assert sum(r["chunks_done"] for r in breakdown["layers"]) == 73
    assert breakdown["eta_s"] == 0 and breakdown["projected_usd"] > 0  # done: what it cost
    assert all(r["pods"] >= 1 and r["wall_s"] > 0 for r in breakdown["layers"])
    out = pipeline(here, "report", RUN, "-o", "r1.html").stdout
    assert "wrote r1.html" in out
    html = (here / "r1.html").read_text()
    assert "Pod attempts by layer" in html and "Plotly.newPlot" in html


def test_by_hand_with_every_stage_builds_the_passes(local_stack: Path):
    """demo data with the passes, setup, start with every stage: the l2cache and meshing
    layers build as ingest's do (`pipeline setup` made their tables). A 32^3 volume in 16^3
    chunks: a 2x2x2 grid, layers 2-3, one pod a layer."""
    here, stages = local_stack, "ingest,l2cache,meshing"
    sizes = ("--size", "32", "--chunk", "16")
    out = pipeline(here, "demo", "data", "passes", *sizes, "--stages", stages).stdout
    assert "stages ingest, l2cache, meshing" in out
    cfg = "passes/pipeline.yml"
    setup = pipeline(here, "setup", "-c", cfg).stdout
    assert "table demo-l2cache ready" in setup and "table demo-meshes ready" in setup
    pipeline(here, "start", "-c", cfg, "--run-id", "p1", "--stages", stages)

    def ended(doc: dict) -> bool:  # a failed layer ends the wait, with its rows to show
        return doc["status"] != "running" or any(r["phase"] == "failed" for r in doc["layers"])

    doc = wait_status(here, "p1", ended, "ended", timeout=300)
    phases = {row["key"]: row["phase"] for row in doc["layers"]}
    assert doc["status"] == "succeeded", phases
    assert sorted(phases) == sorted(
        ["ingest-L2", "ingest-L3", "l2cache-L2", "meshing-L2", "meshing-L3"]
    )
    assert doc["chunks_done"] == doc["chunks_total"] == (8 + 1) + 8 + (8 + 1)
