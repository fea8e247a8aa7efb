"""The worker contract: the env the manifest writes is the env the worker reads (round trip),
every refusal names its variable, and the log record's field names are the logger's."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from scripts.worker_logs import failing_chunk, render_log
from shared.config.config_files import config_from_dict
from shared.jobs.manifest import render_job
from shared.model import worker_contract as wc
from shared.model.worker_contract import LOG, WorkerEnv, WorkerEnvError
from tests.builders.contract_examples import CONFIG, DATASET, ENV
from worker.env import parse_env
from worker.errors import WorkerConfigError
from worker.logs import JsonLogger

ROOT = Path(__file__).resolve().parents[3]


def pod_env(contract: WorkerEnv) -> dict[str, str]:
    return {**contract.to_env(), wc.COMPLETION_INDEX: str(contract.index)}


@pytest.mark.parametrize(
    "contract",
    [
        ENV,
        replace(ENV, term_grace_s=4.5),
        replace(ENV, lock_expiry_s=12.25, n_processes=8, index=0, run_id=""),
        replace(ENV, layer=2, grid_shape=(8, 6, 3), index=9),
    ],
)
def test_round_trip(contract):
    assert WorkerEnv.from_env(pod_env(contract)) == contract


def test_the_manifest_writes_the_contract_the_worker_reads():
    cfg = config_from_dict(CONFIG, DATASET)
    manifest = render_job(cfg, "ingest", 3, run_id="r1", parallelism=1)
    env = {
        e["name"]: e["value"] for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    parsed = parse_env({**env, wc.COMPLETION_INDEX: "2"})
    assert (parsed.layer, parsed.grid_shape, parsed.batch_size) == (3, (4, 3, 2), 7)
    assert (parsed.layer_batch_size, parsed.n_processes, parsed.lock_expiry_s) == (7, 3, 150.0)
    assert parsed.dataset == cfg.ds.model_dump(mode="json", exclude_none=True)
    # The mounts' env (PCG_DATASET) follows the contract, the operator's env comes last.
    contract_part = {k: v for k, v in env.items() if k not in ("EXTRA", wc.DATASET_PATH)}
    assert parsed.to_env() == contract_part  # names, values and order as the manifest's
    assert env["EXTRA"] == "x"
    assert env[wc.DATASET_PATH] == "/app/datasets/dataset.yml"
    # The images renew every 60 s x (L-1) x scale: at most a third of their claim's lifetime
    # (3 min without graph_config.ROOT_LOCK_EXPIRY), whatever our own lock_expiry_s is.
    scale = float(env[wc.LOCK_EXPIRY_SCALE])
    assert 60 * (3 - 1) * scale == pytest.approx(180 / 3)


def test_env_names_and_values_are_the_predecessors():
    env = ENV.to_env()
    assert list(env) == [
        "PCG_GRAPH_ID",
        "PCG_LAYER",
        "PCG_PERM_SEED",
        "PCG_BATCH_SIZE",
        "PCG_N_PROCESSES",
        "PCG_GRID_SHAPE",
        "PCG_STAGE",
        "PCG_RUN_ID",
        "PCG_WORKLOAD",
        "PCG_N_LAYERS",
        "PCG_LOCK_EXPIRY_S",
        "PCG_LOCK_EXPIRY_SCALE",
        "BIGTABLE_PROJECT",
        "BIGTABLE_INSTANCE",
        "PCG_DATASET_JSON",
    ]
    assert env["PCG_BATCH_SIZE"] == "7"  # the layer's own size, used as is (contract 1)
    assert (env["PCG_GRID_SHAPE"], env["PCG_LOCK_EXPIRY_S"]) == ("4,3,2", "150")
    assert "PCG_WORKLOAD" not in replace(ENV, workload="").to_env()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"PCG_GRAPH_ID": None}, "PCG_GRAPH_ID is not set"),
        ({"BIGTABLE_INSTANCE": " "}, "BIGTABLE_INSTANCE is not set"),
        ({"PCG_LAYER": "x"}, "PCG_LAYER='x' is not an integer"),
        ({"PCG_LAYER": "1"}, "PCG_LAYER=1 is out of range"),
        ({"PCG_PERM_SEED": "-1"}, "PCG_PERM_SEED=-1 is out of range"),
        ({"PCG_BATCH_SIZE": "0"}, "PCG_BATCH_SIZE=0 is out of range"),
        ({"PCG_GRID_SHAPE": "4,3"}, "PCG_GRID_SHAPE='4,3' must be 'X,Y,Z'"),
        ({"PCG_GRID_SHAPE": "4,0,2"}, "PCG_GRID_SHAPE='4,0,2' must be 'X,Y,Z'"),
        ({"PCG_GRID_SHAPE": "4,3,3"}, "PCG_GRID_SHAPE=4,3,3 disagrees with PCG_DATASET_JSON"),
        ({"PCG_DATASET_JSON": "{"}, "PCG_DATASET_JSON is not valid JSON"),
        ({"PCG_DATASET_JSON": "[]"}, "PCG_DATASET_JSON must be a JSON object"),
        ({"PCG_WORKLOAD": None}, "PCG_WORKLOAD is not set for stage 'ingest'"),
        ({"PCG_LOCK_EXPIRY_S": "0"}, "PCG_LOCK_EXPIRY_S=0 must be > 0 seconds"),
        ({"PCG_TERM_GRACE_S": "soon"}, "PCG_TERM_GRACE_S='soon' is not a number"),
        ({"PCG_LAYER": "6"}, "PCG_LAYER=6 exceeds PCG_N_LAYERS=5"),
        ({"JOB_COMPLETION_INDEX": None}, "JOB_COMPLETION_INDEX is not set"),
        ({"JOB_COMPLETION_INDEX": "4"}, "JOB_COMPLETION_INDEX=4 is past the last batch"),
    ],
)
def test_refusals_name_the_variable(change, match):
    env = {**pod_env(ENV), **change}
    env = {k: v for k, v in env.items() if v is not None}
    with pytest.raises(WorkerEnvError, match=match):
        WorkerEnv.from_env(env)
    with pytest.raises(WorkerConfigError, match=match):  # the worker's exit-42 error
        parse_env(env)


def test_a_dataset_without_geometry_trusts_the_grid():
    env = {**pod_env(ENV), "PCG_DATASET_JSON": "{}", "PCG_GRID_SHAPE": "9,9,9"}
    assert WorkerEnv.from_env(env).grid_shape == (9, 9, 9)


def test_the_worker_reads_its_contract_without_pydantic():
    """The worker image installs numpy and kvdbclient only."""
    code = (
        "import sys, shared.model.worker_contract, worker.env; "
        "print(sorted(m for m in ('pydantic', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_worker_log_loads_no_numpy():
    """`python -m worker` imports its logger before it blocks SIGTERM in every thread;
    numpy's OpenBLAS threads started before that would let a SIGTERM kill the pod outright."""
    code = "import sys, worker.__main__; print('numpy' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_what_the_worker_logs_is_what_the_cli_reads():
    stream = io.StringIO()
    log = JsonLogger(stream, run="r1", stage="ingest", layer=3, index=2)
    log.info("batch started", batch=2)
    log.error("chunk failed", chunk="3_(1, 2, 0)", coord=(1, 2, 0), traceback="Trace\n  boom")
    log.error("batch finished", exit_code=42)
    text = stream.getvalue()
    records = [json.loads(line) for line in text.splitlines()]
    assert all(r[LOG.run] == "r1" and r[LOG.index] == 2 for r in records)
    assert failing_chunk(text)[LOG.chunk] == "3_(1, 2, 0)"
    shown = render_log(text)
    assert shown[1].endswith("ERROR   chunk failed  [chunk 3_(1, 2, 0)]")
    assert shown[2:4] == ["    Trace", "      boom"]
    assert shown[4].endswith("[exit 42]")
