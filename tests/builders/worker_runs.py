"""Workers run as plain subprocesses on a small demo volume: the environment, start, finish,
log parsing and the oracle, shared by the worker contract and crash tests."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from demo.graph_table import read_all_nodes
from demo.oracle import OracleResult, compare, observed_stats
from shared.model.grid import batch_coords, layer_batch_size, num_batches
from shared.model.layers import chunk_id, layer_count, layer_shape
from tests.builders.worker_env import REPO, worker_env

SIZE, CHUNK, BATCH, SEED = (32, 32, 32), (8, 8, 8), 16, 7
L2_SHAPE = (4, 4, 4)
N_LAYERS = layer_count(L2_SHAPE)


@dataclass
class Demo:
    volume: np.ndarray
    dataset: dict[str, Any]
    expected: dict[str, Any]


@dataclass
class Run:
    code: int
    lines: list[dict[str, Any]]
    stderr: str
    seconds: float

    def summary(self) -> dict[str, Any]:
        return next(x for x in self.lines if x["message"].startswith("batch summary"))

    def messages(self) -> str:
        return "\n".join(x["message"] for x in self.lines)


def _env(table_id: str, demo: Demo, layer: int = 2, index: int = 0, **extra: str) -> dict:
    return worker_env(
        table_id,
        demo.dataset,
        stage="ingest",
        layer=layer,
        index=index,
        batch_size=BATCH,
        seed=SEED,
        l2_shape=L2_SHAPE,
        **extra,
    )


def _start(env: dict) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "worker"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _parse(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _finish(proc: subprocess.Popen[str], started: float, timeout: float = 60) -> Run:
    out, err = proc.communicate(timeout=timeout)
    return Run(proc.returncode, _parse(out), err, time.monotonic() - started)


def _run(env: dict, timeout: float = 60) -> Run:
    return _finish(_start(env), time.monotonic(), timeout)


def _run_layer(table_id: str, demo: Demo, layer: int, **extra: str) -> list[Run]:
    """Every batch of a layer at once, like an Indexed Job with full parallelism."""
    n = num_batches(layer_shape(L2_SHAPE, layer), layer_batch_size(BATCH, layer))
    t0 = time.monotonic()
    procs = [_start(_env(table_id, demo, layer, i, **extra)) for i in range(n)]
    runs = [_finish(p, t0) for p in procs]
    for run in runs:
        assert run.code == 0, (run.messages(), run.stderr[-3000:])
    return runs


def _oracle(client: Any, demo: Demo) -> OracleResult:
    return compare(demo.expected, observed_stats(read_all_nodes(client), N_LAYERS))


def _wait_for(proc: subprocess.Popen[str], text: str, timeout: float = 30) -> list[str]:
    """Read the worker's stdout until a line containing ``text``; returns the lines read."""
    assert proc.stdout is not None
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if text in line:
                return lines
    proc.kill()
    raise AssertionError(f"worker never logged {text!r}: {''.join(lines)} {proc.stderr.read()}")


def _first_chunk(batch_size: int = BATCH) -> tuple[tuple[int, int, int], int]:
    coord = tuple(int(v) for v in batch_coords(0, L2_SHAPE, SEED, batch_size)[0])
    return coord, chunk_id(2, coord, N_LAYERS, 10)  # type: ignore[return-value]
