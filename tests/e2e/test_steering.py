"""Steering a build on the local stack, through the CLI as an operator types it:
`pipeline start --from-layer` (refused while the layer below is not built, then a run that
builds only the layers above), the one-active-run guard, and `pipeline apply` (a ramp change
reaching a running layer's Job, a seed change refused without --force)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.builders.cli_stack import local_stack, pipeline, refused, status, wait_status

pytestmark = pytest.mark.e2e
_ = local_stack  # the fixture


def _demo(here: Path, edit=None) -> str:  # noqa: ANN001 - a dict mutator
    pipeline(here, "demo", "data", "demo-data")
    cfg = here / "demo-data" / "pipeline.yml"
    if edit is not None:
        doc = yaml.safe_load(cfg.read_text())
        edit(doc)
        cfg.write_text(yaml.safe_dump(doc))
    pipeline(here, "setup", "-c", str(cfg))
    return "demo-data/pipeline.yml"


def _layer_pods(here: Path, run_id: str) -> dict[str, int]:
    rows = json.loads(pipeline(here, "run", run_id, "--json").stdout)["layers"]
    return {f"{r['stage']}-L{r['layer']}": r["pods"] for r in rows}


def test_start_from_a_layer_after_checking_the_layer_below(local_stack: Path):
    here = local_stack
    cfg = _demo(here)
    args = ("start", "-c", cfg, "--stages", "ingest", "--advance", "auto")
    out = refused(here, *args, "--run-id", "early", "--from-layer", "3")
    assert "64 of 64 chunks of ingest layer 2 are not marked done" in out
    assert "e.g. chunk ids" in out
    pipeline(here, *args, "--run-id", "full")
    out = refused(here, *args, "--run-id", "second")
    assert "already has an active run: full" in out and "--force" in out
    wait_status(here, "full", lambda d: d["status"] != "running", "finished")
    assert status(here, "full")["status"] == "succeeded"
    started = pipeline(here, *args, "--run-id", "top", "--from-layer", "4").stdout
    assert "built before (done markers checked): ingest-L2, ingest-L3" in started
    doc = wait_status(here, "top", lambda d: d["status"] != "running", "finished")
    assert doc["status"] == "succeeded"
    pods = _layer_pods(here, "top")
    assert pods["ingest-L2"] == pods["ingest-L3"] == 0  # nothing rebuilt below layer 4
    assert pods["ingest-L4"] >= 1


def _slow_ingest(doc: dict) -> None:
    """Pods that take a while (so the layer is still running when the config changes),
    eight indexes at layer 2, and a ramp that stays at one pod until changed."""
    doc["workloads"]["ingest"] = "tests.builders.plugins:slow"
    doc["env"] = {"TEST_PLUGIN_SLEEP_S": "20"}
    doc["job"]["batch_size"] = 8
    doc["job"]["ramp"] = {"start": 1, "factor": 1, "period": 3, "max": 8}


def _l2(doc: dict) -> dict:
    return next(row for row in doc["layers"] if row["key"] == "ingest-L2")


def _job_parallelism(here: Path, run_id: str) -> int:
    out = pipeline(here, "describe", run_id, "ingest", "2").stdout
    return int(re.search(r"parallelism (\d+)", out).group(1))


def test_apply_changes_a_running_layers_parallelism_and_refuses_a_seed_change(
    local_stack: Path,
):
    here = local_stack
    cfg = _demo(here, _slow_ingest)
    pipeline(here, "start", "-c", cfg, "--stages", "ingest", "--run-id", "r1")
    wait_status(here, "r1", lambda d: _l2(d)["phase"] == "running", "running ingest L2", 120)
    assert _job_parallelism(here, "r1") == 1
    edited = yaml.safe_load((here / cfg).read_text())
    edited["job"]["ramp"]["start"] = 3
    (here / "demo-data" / "edited.yml").write_text(yaml.safe_dump(edited))
    out = pipeline(here, "apply", "r1", "-c", "demo-data/edited.yml", "--by", "carol").stdout
    assert "config version 2 by carol" in out
    assert "config.job.ramp.start: 1 -> 3  [at once (next reconcile)]" in out
    wait_status(here, "r1", lambda d: _l2(d)["parallelism"] == 3, "at parallelism 3", 60)
    assert _job_parallelism(here, "r1") == 3
    edited["job"]["perm_seed"] = 7
    (here / "demo-data" / "seed.yml").write_text(yaml.safe_dump(edited))
    out = refused(here, "apply", "r1", "-c", "demo-data/seed.yml")
    assert "config.job.perm_seed 42 -> 7 would invalidate finished work" in out
    assert "--force" in out
    again = pipeline(here, "apply", "r1", "-c", "demo-data/edited.yml").stdout
    assert "no change" in again


def _oom_at_half_a_gib(doc: dict) -> None:
    """Pods that peak at 0.6 GiB against the demo's 0.5 GiB request at layer 2 (layers 3 and 4
    ask for 1 GiB), no retries, and the factor that gives layer 2's next attempt 0.75 GiB."""
    doc["env"] = {"LOCAL_POD_PEAK_MEMORY_GIB": "0.6"}
    doc["job"]["resources"]["overrides"] = {3: {"memory": 1.0}, 4: {"memory": 1.0}}
    doc["job"]["task_retries"] = 0
    doc["job"]["oom_memory_factor"] = 1.5
    doc["job"]["batch_size"] = 32  # two batches of layer 2 at the 64^3 demo


def test_oom_kills_are_counted_alerted_and_the_next_attempt_gets_more_memory(
    local_stack: Path,
):
    here = local_stack
    cfg = _demo(here, _oom_at_half_a_gib)
    pipeline(here, "start", "-c", cfg, "--stages", "ingest", "--run-id", "r1")
    doc = wait_status(here, "r1", lambda d: _l2(d)["phase"] == "failed", "ingest L2 failed")
    assert _l2(doc)["oom"] == 2  # both batches of layer 2, killed once each
    out = pipeline(here, "inspect", "r1", "ingest", "2").stdout
    assert out.count("oom_killed") == 1
    pipeline(here, "submit", "r1", "ingest", "2")
    doc = wait_status(here, "r1", lambda d: d["status"] != "running", "finished")
    assert doc["status"] == "succeeded"
    described = pipeline(here, "pods", "r1", "ingest", "2").stdout
    assert "OOMKilled" not in described  # the new attempt's pods ran
    render = pipeline(here, "describe", "r1", "ingest", "2").stdout
    assert "Complete" in render
