"""The Indexed Job of one stage and layer (DESIGN 4.3), rendered from the config. Pure.

Index i of the Job is batch i of the layer's shuffled chunk grid. What the cluster would reject
is refused here, naming the config field to fix, so a bad config fails when it is loaded
(`validate_config_renders`), not mid-build.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from typing import Any

from shared.autopilot import ResourceLimitError, is_general_purpose, layer_requests
from shared.build_plan import PlanError, default_stages, top_layer
from shared.config import STAGES, JobSettings, PipelineConfig
from shared.grid import layer_batch_size, num_batches
from shared.layers import layer_count, layer_shape

MANAGED_BY = "cave-pipeline"
PREFIX = "cave-pipeline/"
CONTAINER = "worker"
DEFAULT_COMMAND = ["python", "-m", "worker"]
SPOT_NOTICE_S = 25  # Spot gives 25 s between the preemption notice and the kill
SPOT_KEY = "cloud.google.com/gke-spot"
# Pods of an Indexed Job get the hostname "<job name>-<index>", a DNS label (<= 63): keep room
# for "-" and six index digits (a million batches) so the name alone never breaks pod creation.
MAX_JOB_NAME = 56
# Kubernetes batch validation of Indexed Jobs with backoffLimitPerIndex: parallelism and
# maxFailedIndexes <= 100000, and <= 10000 once completions pass 100000.
_CAP, _HIGH_COMPLETIONS, _HIGH_CAP = 100_000, 100_000, 10_000
SPOT_TOLERATION = {"key": SPOT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}

POD_FAILURE_POLICY = {
    "rules": [
        # Spot preemption and evictions are not the chunk's fault: they don't count.
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        # A fatal chunk fails its index only, not the whole layer.
        {
            "action": "FailIndex",
            "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": [42]},
        },
    ]
}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class ManifestError(ValueError):
    """The config would produce a Job the cluster rejects; the message names the field."""


def _sha6(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def job_name(graph_id: str, stage: str, layer: int, run_id: str) -> str:
    """Deterministic `pcg-<graph>-<stage>-l<layer>-<sha256(run_id)[:6]>`, a DNS label of at most
    MAX_JOB_NAME chars (graph part truncated): a re-create of a run's layer finds the same Job.
    """
    stage_part = stage.lower().replace("_", "-")
    tail = f"-{stage_part}-l{int(layer)}-{_sha6(run_id)}"
    budget = MAX_JOB_NAME - len("pcg-") - len(tail)
    graph = re.sub(r"[^a-z0-9-]", "-", graph_id.lower())[: max(budget, 0)].strip("-")
    name = f"pcg-{graph}{tail}" if graph else f"pcg{tail}"
    if not _DNS_LABEL.match(name) or len(name) > MAX_JOB_NAME:
        raise ValueError(f"cannot build a valid Job name from stage {stage!r}, layer {layer}")
    return name


def label_value(text: str) -> str:
    """`text` if it is a valid label value, else a readable prefix plus a hash (still unique)."""
    if _LABEL_VALUE.match(text):
        return text
    clean = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:56].strip("-_.")
    return f"{clean}-{_sha6(text)}" if clean else _sha6(text)


def lock_expiry_s(job: JobSettings, layer: int) -> int:
    """Lock expiry at `layer` in whole seconds (rounded up: longer is the safe side)."""
    return math.ceil(job.lock_expiry_s * job.lock_expiry_factor ** (layer - 2))


def _env(
    cfg: PipelineConfig,
    stage: str,
    layer: int,
    job: JobSettings,
    run_id: str,
    grid: tuple[int, int, int],
    n_layers: int,
) -> list[dict[str, str]]:
    dataset = cfg.ds.model_dump(mode="json", exclude_none=True)
    pairs = [
        ("PCG_GRAPH_ID", cfg.graph_id),
        ("PCG_LAYER", str(layer)),
        ("PCG_PERM_SEED", str(job.perm_seed)),
        # The base size, as the predecessor: the worker halves it per layer itself.
        ("PCG_BATCH_SIZE", str(job.batch_size)),
        ("PCG_N_PROCESSES", cfg.env.get("PCG_N_PROCESSES", "1")),
        # Explicit so operator and worker can never disagree on N.
        ("PCG_GRID_SHAPE", ",".join(map(str, grid))),
        ("PCG_STAGE", stage),
        ("PCG_RUN_ID", run_id),
        *([("PCG_WORKLOAD", cfg.workloads[stage])] if stage in cfg.workloads else []),
        ("PCG_N_LAYERS", str(n_layers)),
        ("PCG_LOCK_EXPIRY_S", str(lock_expiry_s(job, layer))),
        ("BIGTABLE_PROJECT", cfg.bigtable.project),
        ("BIGTABLE_INSTANCE", cfg.bigtable.instance),
        ("PCG_DATASET_JSON", json.dumps(dataset, separators=(",", ":"), sort_keys=True)),
    ]
    # env may not shadow what the controller sets (PCG_N_PROCESSES is the operator's to set).
    reserved = {k for k, _ in pairs} - {"PCG_N_PROCESSES"} | {"PCG_WORKLOAD"}
    for name in cfg.env:
        if name in reserved:
            raise ManifestError(f"env.{name}: set by the controller for every Job; remove it")
        if not name or "=" in name or not all(32 <= ord(c) < 127 for c in name):
            raise ManifestError(f"env.{name}: not a valid environment variable name")
    pairs += [(k, v) for k, v in cfg.env.items() if k != "PCG_N_PROCESSES"]
    return [{"name": k, "value": v} for k, v in pairs]


def _scheduling(cfg: PipelineConfig, job: JobSettings) -> tuple[dict[str, str], list[dict]]:
    selector = {SPOT_KEY: "true"} if job.spot else {}
    tolerations = [dict(SPOT_TOLERATION)] if job.spot else []
    # The default class is chosen by naming none: a pod may not select it explicitly.
    if not is_general_purpose(job.compute_class):
        if not _LABEL_VALUE.match(job.compute_class):
            raise ManifestError(f"job.compute_class: {job.compute_class!r} is not a class name")
        selector["cloud.google.com/compute-class"] = job.compute_class
    if cfg.zone:
        if not _LABEL_VALUE.match(cfg.zone):
            raise ManifestError(f"zone: {cfg.zone!r} is not a zone name")
        selector["topology.kubernetes.io/zone"] = cfg.zone
    return selector, tolerations


def _check_names(cfg: PipelineConfig, stage: str, run_id: str) -> None:
    if stage not in STAGES:
        raise ManifestError(f"stage {stage!r}: unknown; expected one of {', '.join(STAGES)}")
    if not run_id:
        raise ManifestError("run id: must not be empty")
    if not _DNS_LABEL.match(cfg.namespace):
        raise ManifestError(f"namespace: {cfg.namespace!r} is not a DNS-1123 label")
    if not _DNS_SUBDOMAIN.match(cfg.workload_identity.ksa):
        raise ManifestError(f"workload_identity.ksa: {cfg.workload_identity.ksa!r} is invalid")
    if not cfg.images.get(stage, "").strip():
        raise ManifestError(f"images.{stage}: no image configured for stage {stage!r}")
    if stage in cfg.commands and not cfg.commands[stage]:
        raise ManifestError(f"commands.{stage}: empty command; remove it to use the default")
    if not cfg.workloads.get(stage, "").strip() and stage not in cfg.commands:
        # Never a silent default: a PyChunkedGraph Job must not run the demo's ingest.
        raise ManifestError(
            f"workloads.{stage}: stage {stage!r} has neither a workload nor a command; set "
            f"workloads.{stage} (package.module:function) or commands.{stage}"
        )


def render_job(
    cfg: PipelineConfig,
    stage: str,
    layer: int,
    *,
    run_id: str,
    parallelism: int,
    suspend: bool = False,
) -> dict[str, Any]:
    """The batch/v1 Indexed Job of `stage` at `layer`, or ManifestError naming the field."""
    _check_names(cfg, stage, run_id)
    job = cfg.job.for_stage(stage)
    l2, fanout = cfg.layer2_shape(), cfg.ds.graph_config.FANOUT
    n_layers = layer_count(l2, fanout)
    if not 2 <= layer <= n_layers:
        raise ManifestError(f"layer {layer}: out of range; this graph's layers are 2..{n_layers}")
    if parallelism < 1:
        raise ManifestError(f"parallelism {parallelism}: must be >= 1 (job.ramp.start/max)")
    grid = layer_shape(l2, layer, fanout)
    batch = layer_batch_size(job.batch_size, layer)
    completions = num_batches(grid, batch)
    name = job_name(cfg.graph_id, stage, layer, run_id)
    if len(name) + 1 + len(str(completions - 1)) > 63:  # the last pod's hostname
        raise ManifestError(f"job.batch_size: {completions} batches overflow pod hostnames")
    cap = _HIGH_CAP if completions > _HIGH_COMPLETIONS else _CAP
    try:
        req = layer_requests(job, layer)
    except ResourceLimitError as e:
        where = f" (or job.workloads.{stage})" if stage in cfg.job.workloads else ""
        raise ManifestError(f"job.resources{where}, stage {stage}: {e}") from None
    selector, tolerations = _scheduling(cfg, job)

    labels = {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        PREFIX + "run": label_value(run_id),
        PREFIX + "stage": stage,
        PREFIX + "graph": label_value(cfg.graph_id),
        PREFIX + "layer": str(layer),
    }
    annotations = {
        PREFIX + "run-id": run_id,  # the label may be shortened; this is the full id
        PREFIX + "chunks": str(math.prod(grid)),
        PREFIX + "batch-size": str(batch),
        PREFIX + "grid-shape": ",".join(map(str, grid)),
    }
    meta = {"labels": labels, "annotations": annotations}
    quantities = {"cpu": req.cpu_str, "memory": req.memory_str}
    container = {
        "name": CONTAINER,
        "image": cfg.images[stage],
        "command": list(cfg.commands.get(stage) or DEFAULT_COMMAND),
        "env": _env(cfg, stage, layer, job, run_id, grid, n_layers),
        # Autopilot sets limits equal to requests anyway; saying so keeps the manifest honest.
        "resources": {"requests": dict(quantities), "limits": dict(quantities)},
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": cfg.workload_identity.ksa,
        "terminationGracePeriodSeconds": SPOT_NOTICE_S,
        "containers": [container],
        **({"nodeSelector": selector} if selector else {}),
        **({"tolerations": tolerations} if tolerations else {}),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": cfg.namespace, **copy.deepcopy(meta)},
        # No ttlSecondsAfterFinished (the controller reads finished Jobs) and no
        # activeDeadlineSeconds (a layer takes as long as it takes; stalls are alerted on).
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": min(parallelism, completions, cap),
            "backoffLimitPerIndex": job.task_retries,
            # The next attempt of an index starts only once the previous pod is terminal, so
            # it may take over that attempt's chunk claims at once (worker.claim_tokens).
            "podReplacementPolicy": "Failed",
            "maxFailedIndexes": min(job.max_failed_tasks, completions, cap),
            "suspend": suspend,
            "podFailurePolicy": copy.deepcopy(POD_FAILURE_POLICY),
            "template": {
                "metadata": copy.deepcopy(meta),
                "spec": pod_spec,
            },
        },
    }


def implied_renders(cfg: PipelineConfig) -> list[tuple[str, int]]:
    """(stage, layer) pairs the config implies: every layer of the build DAG's stages
    (`shared.build_plan`)."""
    try:
        return [(s, n) for s in default_stages(cfg) for n in range(2, top_layer(cfg, s) + 1)]
    except PlanError as e:
        raise ManifestError(str(e)) from None


def validate_config_renders(cfg: PipelineConfig) -> None:
    """Render every implied (stage, layer); raise the first ManifestError (config load time)."""
    for stage, layer in implied_renders(cfg):
        render_job(cfg, stage, layer, run_id="validate", parallelism=1)
