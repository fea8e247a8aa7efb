"""The Indexed Job of one stage and layer, rendered from the config. Pure.

See docs/job-and-worker-contract.md#the-job.

Index i of the Job is batch i of the layer's shuffled chunk grid. What the cluster would reject
is refused here, naming the config field to fix, so a bad config fails when it is loaded
(`validate_config_renders`), not mid-build.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from shared.config.config import JobSettings, PipelineConfig
from shared.config.env_overrides import OVERRIDABLE
from shared.config.stage_selection import stage_layers
from shared.jobs import image_pods, worker_pod
from shared.jobs.autopilot import Requests, ResourceLimitError
from shared.jobs.layer_spec import LayerRangeError, LayerSpec, layer_spec, short_hash
from shared.model import held_wait, lock_renewal
from shared.model.stages import DEFAULT_COMMAND, STAGE_NAMES, PlanError
from shared.model.worker_contract import (
    L2CACHE_ENV,
    LOCK_EXPIRY_SCALE,
    N_PROCESSES,
    RESERVED,
    WorkerEnv,
)

MANAGED_BY = "cave-pipeline"
PREFIX = "cave-pipeline/"
CONTAINER = "worker"
SPOT_NOTICE_S = image_pods.WORKER_GRACE_S  # Spot's notice: our worker releases its claims
SPOT_KEY = worker_pod.SPOT_KEY
# Kubernetes batch validation of Indexed Jobs with backoffLimitPerIndex: parallelism and
# maxFailedIndexes <= 100000, and <= 10000 once completions pass 100000.
_CAP, _HIGH_COMPLETIONS, _HIGH_CAP = 100_000, 100_000, 10_000
SPOT_TOLERATION = worker_pod.SPOT_TOLERATION

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


def label_value(text: str) -> str:
    """`text` if it is a valid label value, else a readable prefix plus a hash (still unique)."""
    if _LABEL_VALUE.match(text):
        return text
    clean = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:56].strip("-_.")
    return f"{clean}-{short_hash(text)}" if clean else short_hash(text)


def worker_env(cfg: PipelineConfig, spec: LayerSpec, run_id: str, attempt: int = 0) -> WorkerEnv:
    """The worker contract of one layer's pods, for the layer's Job `attempt`
    (JOB_COMPLETION_INDEX is Kubernetes')."""
    job = cfg.job.for_stage(spec.stage)
    return WorkerEnv(
        graph_id=cfg.graph_id,
        layer=spec.layer,
        seed=spec.seed,
        # The layer's own size (completions were computed from it): PyChunkedGraph images use
        # PCG_BATCH_SIZE as is, so the base size would starve most upper-layer pods.
        batch_size=spec.batch_size,
        n_processes=worker_pod.layer_processes(job, spec.requests),  # per layer
        grid_shape=spec.grid_shape,
        stage=spec.stage,
        run_id=run_id,
        workload=cfg.workloads.get(spec.stage, ""),
        n_layers=spec.n_layers,
        lock_expiry_s=spec.lock_expiry_s,
        project=cfg.bigtable.project,
        instance=cfg.bigtable.instance,
        dataset=_dataset(cfg),
        job_attempt=attempt,
    )


def stage_env(cfg: PipelineConfig, stage: str) -> dict[str, str]:
    """What a stage's pods get from the dataset: the l2cache target (`L2CACHE_CV_PATH`,
    `L2CACHE_TABLE_ID` from `l2cache_config`, the predecessor's names) for l2cache."""
    if stage != "l2cache":
        return {}
    block = cfg.ds.l2cache_config or {}
    return {name: str(block[key]) for name, key in L2CACHE_ENV.items() if block.get(key)}


def _env(
    cfg: PipelineConfig, contract: dict[str, str], extra: dict[str, str] | None = None
) -> list[dict[str, str]]:
    """The container env: the worker contract, then what the stage and the mounts add
    (unless the operator's `env` sets it), then the operator's `env` (which may replace only
    the overridable keys of what the controller sets)."""
    for name in cfg.env:
        if name == N_PROCESSES:
            raise ManifestError(
                f"env.{N_PROCESSES}: set per layer from job.processes_per_vcpu x the layer's "
                "vCPU; remove it (job.parallel: false for one process)"
            )
        if name in RESERVED and name not in OVERRIDABLE:
            raise ManifestError(f"env.{name}: set by the controller for every Job; remove it")
        if not name or "=" in name or not all(32 <= ord(c) < 127 for c in name):
            raise ManifestError(f"env.{name}: not a valid environment variable name")
    if LOCK_EXPIRY_SCALE in cfg.env:
        # The operator's scale replaces the per-layer one (lock_scale_warning says where it
        # breaks the renewal bound).
        _operator_scale(cfg)
    if held_wait.HELD_WAIT_ENV in cfg.env:
        # Unlike the scale, a short wait is refused: it costs a retry per preemption.
        try:
            held_wait.check_operator_wait(cfg.env[held_wait.HELD_WAIT_ENV], build_held_wait(cfg))
        except held_wait.HeldWaitError as e:
            raise ManifestError(str(e)) from None
    # An overridable key (shared/config/env_overrides.py) the operator sets replaces the contract's.
    pairs = [(k, v) for k, v in contract.items() if k not in cfg.env]
    pairs += [(k, v) for k, v in (extra or {}).items() if k not in cfg.env]
    pairs += list(cfg.env.items())
    return [{"name": k, "value": v} for k, v in pairs]


def check_image_dataset(cfg: PipelineConfig, stage: str) -> None:
    """ManifestError when `stage` runs an image's entry point and the dataset file it gets
    holds what the image cannot read (graph_config.ROOT_LOCK_EXPIRY: shared.model.lock_renewal).
    """
    if worker_pod.runs_worker_image(cfg, stage):
        return
    try:
        lock_renewal.check_root_lock_expiry_for_images(_dataset(cfg))
    except lock_renewal.LockRenewalError as e:
        raise ManifestError(str(e)) from None


def build_held_wait(cfg: PipelineConfig) -> held_wait.HeldWait:
    """The build's held-chunk wait (shared.model.held_wait): the graph's claim lifetime and
    the images' poll. ManifestError naming the key when either cannot be read."""
    try:
        return held_wait.held_wait(lock_renewal.claim_lifetime_s(_dataset(cfg)), cfg.env)
    except (lock_renewal.LockRenewalError, held_wait.HeldWaitError) as e:
        raise ManifestError(str(e)) from None


def _operator_scale(cfg: PipelineConfig) -> float | None:
    """The operator's `env.PCG_LOCK_EXPIRY_SCALE` as a number, None when not set."""
    if LOCK_EXPIRY_SCALE not in cfg.env:
        return None
    try:
        return lock_renewal.parse_scale(cfg.env[LOCK_EXPIRY_SCALE])
    except lock_renewal.LockRenewalError as e:
        raise ManifestError(str(e)) from None


def lock_scale_warning(cfg: PipelineConfig) -> str | None:
    """The warning for an operator's `env.PCG_LOCK_EXPIRY_SCALE` that makes PyChunkedGraph
    images renew an ingest claim later than a third of its lifetime at some layer (naming
    the layers, renewal against lifetime), or None (no override, or a safe one)."""
    scale = _operator_scale(cfg)
    if scale is None:
        return None
    try:
        lifetime = lock_renewal.claim_lifetime_s(_dataset(cfg))
        layers = stage_layers(cfg, "ingest")
    except (lock_renewal.LockRenewalError, PlanError) as e:
        raise ManifestError(str(e)) from None
    return lock_renewal.override_warning(scale, layers, lifetime)


def _dataset(cfg: PipelineConfig) -> dict[str, Any]:
    """The dataset as the pods get it (PCG_DATASET_JSON)."""
    return cfg.ds.model_dump(mode="json", exclude_none=True)


def job_labels(cfg: PipelineConfig, run_id: str, stage: str, layer: int) -> dict[str, str]:
    """The labels of every Job of a run and of its pods (the ownership checks and the
    controller's listings select on them): manager, run, stage, graph, layer (0: setup)."""
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        PREFIX + "run": label_value(run_id),
        PREFIX + "stage": stage,
        PREFIX + "graph": label_value(cfg.graph_id),
        PREFIX + "layer": str(layer),
    }


def graph_scope(graph_id: str) -> dict[str, str]:
    """The labels every pod sweep of a run (a delete, a pause's drain) selects on beside the
    Job's own: its graph's, so a co-tenant's build in the namespace is never drained."""
    return {PREFIX + "graph": label_value(graph_id)}


def pod_spec(
    cfg: PipelineConfig,
    stage: str,
    command: list[str],
    req: Requests,
    run_id: str,
    contract: dict[str, str],
    *,
    service_account: str | None = None,
) -> dict[str, Any]:
    """The pod spec of every Job of a run, a layer's or a setup's: one container running
    `command` in the stage's image with its requests, the contract env then the stage's and
    the mounts'; Spot scheduling (or the compute class); the Secret and dataset mounts
    (docs/job-and-worker-contract.md#mounts); run as `service_account` (default: the workers',
    `workload_identity.ksa`). ManifestError if the scheduling cannot be rendered."""
    job = cfg.job.for_stage(stage)
    selector, tolerations = _scheduling(cfg, job)
    ours = worker_pod.runs_worker_image(cfg, stage)
    check_image_dataset(cfg, stage)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": cfg.images[stage],
        "command": command,
        "resources": worker_pod.resources_block(job, req),
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": service_account or cfg.workload_identity.ksa,
        # 5 s for the images (no SIGTERM handler), Spot's 25 s for ours (shared/jobs/image_pods.py)
        "terminationGracePeriodSeconds": image_pods.grace_seconds(ours),
        "containers": [container],
        **({"nodeSelector": selector} if selector else {}),
        **({"tolerations": tolerations} if tolerations else {}),
    }
    mount_env = worker_pod.pod_volumes(pod, container, cfg, run_id, stage)
    # Only ingest's image worker waits for held chunks; the wait is the same at every layer,
    # as the claim lifetime is.
    held_s = build_held_wait(cfg).written_s if stage == "ingest" else None
    pinned = image_pods.pinned_env(ours, cfg.env, held_s)
    container["env"] = _env(cfg, contract, {**stage_env(cfg, stage), **mount_env, **pinned})
    return pod


def _scheduling(cfg: PipelineConfig, job: JobSettings) -> tuple[dict[str, str], list[dict]]:
    try:
        return worker_pod.scheduling(job, cfg.zone)
    except worker_pod.SchedulingError as e:
        raise ManifestError(str(e)) from None


def check_names(cfg: PipelineConfig, stage: str, run_id: str) -> None:
    """ManifestError unless the stage, run id and namespace can name a Job."""
    if stage not in STAGE_NAMES:
        raise ManifestError(f"stage {stage!r}: unknown; expected one of {', '.join(STAGE_NAMES)}")
    if not run_id:
        raise ManifestError("run id: must not be empty")
    if not _DNS_LABEL.match(cfg.namespace):
        raise ManifestError(f"namespace: {cfg.namespace!r} is not a DNS-1123 label")
    for key in ("ksa", "setup_ksa"):
        name = getattr(cfg.workload_identity, key)
        if not _DNS_SUBDOMAIN.match(name):
            raise ManifestError(
                f"workload_identity.{key}: {name!r} is not a Kubernetes service account name "
                "(lowercase letters, digits, '-' and '.')"
            )
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


def _spec(cfg: PipelineConfig, stage: str, layer: int) -> LayerSpec:
    try:
        return layer_spec(cfg, stage, layer)
    except LayerRangeError as e:
        raise ManifestError(str(e)) from None
    except ResourceLimitError as e:
        where = f" (or job.workloads.{stage})" if stage in cfg.job.workloads else ""
        raise ManifestError(f"job.resources{where}, stage {stage}: {e}") from None


def parallelism_cap(completions: int) -> int:
    """The largest parallelism (and maxFailedIndexes) the API server accepts for a Job."""
    return _HIGH_CAP if completions > _HIGH_COMPLETIONS else _CAP


def render_job(
    cfg: PipelineConfig,
    stage: str,
    layer: int,
    *,
    run_id: str,
    parallelism: int,
    suspend: bool = False,
    attempt: int = 0,
) -> dict[str, Any]:
    """The batch/v1 Indexed Job of `stage` at `layer` (named for `attempt` of the layer in
    run `run_id`), or ManifestError naming the field."""
    check_names(cfg, stage, run_id)
    check_image_dataset(cfg, stage)  # before the scale reads the same key as seconds
    spec = _spec(cfg, stage, layer)
    if parallelism < 1:
        raise ManifestError(f"parallelism {parallelism}: must be >= 1 (job.ramp.start/max)")
    job = cfg.job.for_stage(stage)
    completions = spec.completions
    name = spec.job_name(run_id, attempt)
    if len(name) + 1 + len(str(completions - 1)) > 63:  # the last pod's hostname
        raise ManifestError(f"job.batch_size: {completions} batches overflow pod hostnames")
    cap = parallelism_cap(completions)
    req = spec.requests
    command = list(cfg.commands.get(stage) or DEFAULT_COMMAND)
    try:
        contract = worker_env(cfg, spec, run_id, attempt).to_env()
    except lock_renewal.LockRenewalError as e:
        raise ManifestError(str(e)) from None
    pod = pod_spec(cfg, stage, command, req, run_id, contract)

    labels = job_labels(cfg, run_id, stage, layer)
    annotations = {
        PREFIX + "run-id": run_id,  # the label may be shortened; this is the full id
        PREFIX + "chunks": str(spec.chunks),
        PREFIX + "batch-size": str(spec.batch_size),
        PREFIX + "grid-shape": ",".join(map(str, spec.grid_shape)),
    }
    return indexed_job(
        name,
        cfg.namespace,
        {"labels": labels, "annotations": annotations},
        pod,
        completions=completions,
        parallelism=min(parallelism, completions, cap),
        backoff_limit_per_index=job.task_retries,
        max_failed_indexes=min(job.max_failed_tasks, completions, cap),
        suspend=suspend,
    )


def indexed_job(
    name: str,
    namespace: str,
    meta: dict[str, Any],
    pod: dict[str, Any],
    *,
    completions: int,
    parallelism: int,
    backoff_limit_per_index: int,
    max_failed_indexes: int | None = None,
    suspend: bool = False,
) -> dict[str, Any]:
    """The batch/v1 Indexed Job skeleton every Job of a run shares (a layer's and a setup
    pass's): `meta` (labels, annotations) on the Job and its pod template, the pod failure
    policy, `podReplacementPolicy: Failed`. `max_failed_indexes` None: not set (the Job
    fails on its first failed index past its retries)."""
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": completions,
        "parallelism": parallelism,
        "backoffLimitPerIndex": backoff_limit_per_index,
        # The next attempt of an index starts only once the previous pod is terminal, so
        # it may take over that attempt's chunk claims at once (worker.claim_tokens).
        "podReplacementPolicy": "Failed",
    }
    if max_failed_indexes is not None:
        spec["maxFailedIndexes"] = max_failed_indexes
    spec |= {
        "suspend": suspend,
        # Spot preemptions and evictions do not count; exit 42 fails its index only.
        "podFailurePolicy": copy.deepcopy(POD_FAILURE_POLICY),
        "template": {"metadata": copy.deepcopy(meta), "spec": pod},
    }
    # No ttlSecondsAfterFinished (the controller reads finished Jobs) and no
    # activeDeadlineSeconds (a layer takes as long as it takes; stalls are alerted on).
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, **copy.deepcopy(meta)},
        "spec": spec,
    }


def for_create(manifest: dict[str, Any], parallelism: int, suspend: bool) -> dict[str, Any]:
    """A rendered Job with the parallelism and suspension a decision creates it with."""
    out = copy.deepcopy(manifest)
    spec = out["spec"]
    completions = spec["completions"]
    spec["parallelism"] = min(parallelism, completions, parallelism_cap(completions))
    spec["suspend"] = suspend
    return out
