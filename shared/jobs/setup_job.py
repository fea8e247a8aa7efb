"""The one-shot Job of a stage's setup pass (docs/setup-passes.md), rendered from the config.
Pure.

A setup pass runs once before a stage's first layer: PyChunkedGraph's ingest setup creates the
graph's table and metadata (with `--exist-ok` when the controller found the graph's metadata
in the table already: docs/setup-passes.md), its meshing setup the mesh metadata, the
l2cache setup its cache table; the demo's setup (through `python -m worker.setup`) writes the
graph metadata its workers read their grid from. The command is
`shared.config.stage_selection.setup_command`. The Job is an Indexed Job of one completion, so the
clusters treat it like a layer's; it gets no retries
(a setup fails fast, with its log tail in the alert) and the pods get the same mounts,
scheduling and operator env as the stage's workers.
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

import yaml

from shared.config.config import PipelineConfig
from shared.config.stage_selection import setup_command
from shared.jobs import worker_pod
from shared.jobs.autopilot import Requests, ResourceLimitError, snap_requests
from shared.jobs.graph_probe import runs_in_pcg_image, with_graph_probe
from shared.jobs.layer_spec import MAX_JOB_NAME, attempt_salt, short_hash
from shared.jobs.manifest import (
    MANAGED_BY,
    PREFIX,
    ManifestError,
    check_names,
    indexed_job,
    job_labels,
    label_value,
    pod_spec,
)
from shared.model.layers import layer_count
from shared.model.stages import PlanError
from shared.model.state import SETUP_LAYER
from shared.model.worker_contract import CAVE_SECRET, DATASET_FILE, setup_env

STEP = PREFIX + "step"
# What a setup pod asks for: the predecessor's util pod (imports PyChunkedGraph, writes a
# few rows), snapped to the class's grid.
SETUP_CPU, SETUP_MEMORY_GIB = 0.25, 1.0
# PyChunkedGraph reads data_source with its own upper-case keys (and no `size`: its grid
# comes from the watershed), so the mounted dataset file is written in that shape.
# PyChunkedGraph's meshing opens a graphene volume that wants cave-secret.json to exist but
# never calls the graph server: a placeholder token satisfies it (the predecessor's, too).
PLACEHOLDER_CAVE_SECRET = b'{"token": "placeholder"}'
_PCG_SOURCE_KEYS = {"watershed": "WATERSHED", "edges": "EDGES", "components": "COMPONENTS"}


def setup_job_name(graph_id: str, stage: str, run_id: str, attempt: int = 0) -> str:
    """Deterministic `pcg-<graph>-<stage>-setup-<hash>` (graph part truncated to fit)."""
    tail = f"-{stage.replace('_', '-')}-setup-{short_hash(attempt_salt(run_id, attempt))}"
    budget = MAX_JOB_NAME - len("pcg-") - len(tail)
    graph = re.sub(r"[^a-z0-9-]", "-", graph_id.lower())[: max(budget, 0)].strip("-")
    return f"pcg-{graph}{tail}" if graph else f"pcg{tail}"


def setup_requests(compute_class: str = "") -> Requests:
    """What a setup pod requests (snapped to Autopilot for the stage's compute class)."""
    return snap_requests(SETUP_CPU, SETUP_MEMORY_GIB, compute_class)


def has_setup(cfg: PipelineConfig, stage: str) -> bool:
    """Whether the stage runs a setup pass (`commands.<stage>_setup: []` turns it off)."""
    try:
        return setup_command(cfg, stage) is not None
    except PlanError:
        return True  # it has one, which cannot be rendered: the run fails it, saying why


def probes_graph(cfg: PipelineConfig, stage: str) -> bool:
    """Whether the stage's setup pod runs through the graph probe (`shared.jobs.graph_probe`):
    its setup is one of PyChunkedGraph's modules, so the image reports the graph's grids."""
    try:
        return runs_in_pcg_image(setup_command(cfg, stage))
    except PlanError:
        return False


def render_setup_job(
    cfg: PipelineConfig, stage: str, *, run_id: str, attempt: int = 0, exist_ok: bool = False
) -> dict[str, Any]:
    """The batch/v1 Job of `stage`'s setup pass in run `run_id` (its `attempt`, a new Job per
    re-submit), or ManifestError. `exist_ok`: the graph's table holds its metadata already,
    so an image's ingest setup gets `--exist-ok` (docs/setup-passes.md)."""
    check_names(cfg, stage, run_id)
    try:
        argv = setup_command(cfg, stage, exist_ok=exist_ok)
        grid = cfg.layer2_shape()
        n_layers = layer_count(grid, cfg.ds.graph_config.FANOUT)
        req = setup_requests(cfg.job.for_stage(stage).compute_class)
    except (PlanError, ResourceLimitError) as e:
        raise ManifestError(f"setup of stage {stage}: {e}") from None
    if argv is None:
        raise ManifestError(f"commands.{stage}_setup is empty: stage {stage} has no setup")
    if runs_in_pcg_image(argv):
        # The image reports the grids its harness iterates (docs/setup-passes.md).
        argv = with_graph_probe(argv, cfg.graph_id)
    name = setup_job_name(cfg.graph_id, stage, run_id, attempt)
    labels = {**job_labels(cfg, run_id, stage, SETUP_LAYER), STEP: "setup"}
    meta = {"labels": labels, "annotations": {PREFIX + "run-id": run_id}}
    contract = setup_env(
        graph_id=cfg.graph_id,
        stage=stage,
        run_id=run_id,
        workload=cfg.workloads.get(stage, ""),
        layer2_shape=grid,
        n_layers=n_layers,
        project=cfg.bigtable.project,
        instance=cfg.bigtable.instance,
        dataset=cfg.ds.model_dump(mode="json", exclude_none=True),
    )
    # The setup creates the graph's table: its own account (Bigtable admin, docs/deploying.md).
    pod = pod_spec(
        cfg, stage, argv, req, run_id, contract, service_account=cfg.workload_identity.setup_ksa
    )
    # No retries: a failed setup is reported with its log at once; a Spot preemption does
    # not count (the DisruptionTarget rule) and is retried.
    return indexed_job(
        name, cfg.namespace, meta, pod, completions=1, parallelism=1, backoff_limit_per_index=0
    )


def pcg_dataset(dataset: dict[str, Any]) -> dict[str, Any]:
    """A dataset (this project's shape, as snapshotted with a run) in PyChunkedGraph's shape:
    `data_source` with its upper-case keys, without `size`."""
    out = copy.deepcopy(dataset)
    source = out.get("data_source") or {}
    mapped = {_PCG_SOURCE_KEYS.get(k, k): v for k, v in source.items() if k != "size"}
    out["data_source"] = {k: v for k, v in mapped.items() if v not in ("", None)}
    return out


def dataset_config_map_manifest(cfg: PipelineConfig, run_id: str) -> dict[str, Any]:
    """The v1 ConfigMap of run `run_id`'s dataset file, mounted by its pods at
    /app/datasets/dataset.yml (`PCG_DATASET`)."""
    dataset = pcg_dataset(cfg.ds.model_dump(mode="json", exclude_none=True))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": worker_pod.dataset_config_map(cfg.graph_id, run_id),
            "namespace": cfg.namespace,
            "labels": {
                "app.kubernetes.io/managed-by": MANAGED_BY,
                PREFIX + "run": label_value(run_id),
                PREFIX + "graph": label_value(cfg.graph_id),
            },
        },
        "data": {DATASET_FILE: yaml.safe_dump(dataset, sort_keys=False)},
    }


def secret_manifest(cfg: PipelineConfig, contents: dict[str, bytes]) -> dict[str, Any]:
    """The v1 Secret `secret_name` of the pods' credential files (file name in the pod ->
    contents, read from `secret_files`), with a placeholder cave-secret.json when none is
    given. Mounted in ~/.cloudvolume/secrets of the image's user by every worker and setup
    pod (`worker_pod.secrets_dir`)."""
    files = dict(contents)
    files.setdefault(CAVE_SECRET, PLACEHOLDER_CAVE_SECRET)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": cfg.secret_name,
            "namespace": cfg.namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
        },
        "data": {k: base64.b64encode(v).decode() for k, v in sorted(files.items())},
    }
