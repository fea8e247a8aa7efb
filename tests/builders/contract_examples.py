"""One layer's worker contract and the config that renders it, shared by the contract,
lock-renewal and claim-race tests."""

from __future__ import annotations

from typing import Any

from shared.model.worker_contract import WorkerEnv

DATASET = {"data_source": {"size": [512, 384, 192]}, "graph_config": {"CHUNK_SIZE": [64] * 3}}
CONFIG: dict[str, Any] = {
    "graph_id": "toy",
    "dataset": "dataset.yml",
    "bigtable": {"project": "bt-proj", "instance": "bt-inst"},
    "images": {"ingest": "img:1"},
    "workloads": {"ingest": "pcg.ingest:f"},
    "job": {
        "batch_size": 15,
        "lock_expiry_s": 100,
        "lock_expiry_factor": 1.5,
        "processes_per_vcpu": 3,
        "resources": {"cpu": {"base": 1}},
    },
    "env": {"EXTRA": "x"},
}
ENV = WorkerEnv(
    graph_id="toy",
    layer=3,
    seed=42,
    batch_size=7,  # layer 3's own size of base 15
    n_processes=1,
    grid_shape=(4, 3, 2),
    stage="ingest",
    run_id="r1",
    workload="pcg.ingest:f",
    n_layers=5,
    lock_expiry_s=150.0,
    project="p",
    instance="i",
    dataset=DATASET,
    index=3,
)
