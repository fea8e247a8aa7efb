"""What one worker pod of a layer asks for: its process count, its resources block and its
scheduling (node selector and tolerations). Pure: no I/O.

These follow what PyChunkedGraph images expect (docs/job-and-worker-contract.md#worker-env):

- `PCG_N_PROCESSES` sizes the images' process pools. Left to themselves they size a pool from
  the node's cores (`os.cpu_count()` is not cgroup-aware) and throttle a small pod, so the
  count comes from the pod's own snapped (billed) vCPU: `processes_per_vcpu x` its whole vCPU
  (the predecessor's newest rule), at least 1; `job.parallel: false` pins it to 1.
- Requests without limits let a pod burst into a node's spare capacity (`job.burst`, on by
  default); `job.burst: false` sets limits equal to requests.
- The compute class is one of the pod-billed ones (the default, Balanced, Scale-Out:
  shared/config/compute_class.py refuses the others at load), each of which takes the Spot
  selector alongside its class selector.
"""

from __future__ import annotations

import math
import re
from typing import Any

from shared.config.config import JobSettings, PipelineConfig
from shared.jobs.autopilot import Requests, is_general_purpose
from shared.model.worker_contract import (
    DATASET_DIR,
    DATASET_FILE,
    DATASET_PATH,
    GOOGLE_CREDENTIALS,
    GOOGLE_SECRET,
    SECRETS_DIR,
    WORKER_SECRETS_DIR,
)

SPOT_KEY = "cloud.google.com/gke-spot"
SECRETS_VOLUME, DATASET_VOLUME = "secrets", "dataset"
DATASET_MAP_PREFIX = "cave-dataset-"
CLASS_KEY = "cloud.google.com/compute-class"
ZONE_KEY = "topology.kubernetes.io/zone"
SPOT_TOLERATION = {"key": SPOT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# Float noise in a snapped vCPU (e.g. 2.9999999) must not lose a whole vCPU.
_EPS = 1e-9


class SchedulingError(ValueError):
    """A scheduling field the cluster would reject; the message names the config field."""


def layer_processes(job: JobSettings, req: Requests) -> int:
    """`PCG_N_PROCESSES` of a layer whose pods request `req` (snapped, i.e. billed): 1 without
    `job.parallel`, else `job.processes_per_vcpu` (0 read as 1) x the whole billed vCPU, at
    least 1. Whole vCPU, as the predecessor counts them, so a file written for it gets the
    same pools: a 2.75-vCPU pod at 2 per vCPU runs 4, not 5."""
    if not job.parallel:
        return 1
    whole_cpu = math.floor(req.cpu + _EPS)
    return max(1, whole_cpu * max(1, job.processes_per_vcpu))


def resources_block(job: JobSettings, req: Requests) -> dict[str, dict[str, str]]:
    """The container's `resources`: requests only (bursting), or limits = requests when
    `job.burst` is off."""
    quantities = {"cpu": req.cpu_str, "memory": req.memory_str}
    if job.burst:
        return {"requests": quantities}
    return {"requests": quantities, "limits": dict(quantities)}


def scheduling(job: JobSettings, zone: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(nodeSelector, tolerations) of a worker pod; SchedulingError names the bad field."""
    selector = {SPOT_KEY: "true"} if job.spot else {}
    tolerations = [dict(SPOT_TOLERATION)] if job.spot else []
    # The default class is chosen by naming none: a pod may not select it explicitly.
    if not is_general_purpose(job.compute_class):
        selector[CLASS_KEY] = job.compute_class
    if zone:
        if not _LABEL_VALUE.match(zone):
            raise SchedulingError(f"zone: {zone!r} is not a zone name")
        selector[ZONE_KEY] = zone
    return selector, tolerations


def dataset_config_map(graph_id: str, run_id: str) -> str:
    """The ConfigMap holding run `run_id`'s dataset file (one per run: a run mounts the
    dataset it was started with, whatever is edited later). A DNS-1123 subdomain."""
    import hashlib

    graph = re.sub(r"[^a-z0-9-]", "-", graph_id.lower())[:30].strip("-") or "graph"
    return f"{DATASET_MAP_PREFIX}{graph}-{hashlib.sha256(run_id.encode()).hexdigest()[:8]}"


def runs_worker_image(cfg: PipelineConfig, stage: str) -> bool:
    """True when the stage's pods run our worker (`python -m worker`, no `commands.<stage>`),
    i.e. our worker image (non-root, uid 10001); False for an image's own entry point (the
    PyChunkedGraph images, which run as root)."""
    return stage not in cfg.commands


def secrets_dir(cfg: PipelineConfig, stage: str) -> str:
    """Where the stage's pods find the Secret's files: ~/.cloudvolume/secrets of the image's
    user (/home/worker for our worker image, /root for the PyChunkedGraph images)."""
    return WORKER_SECRETS_DIR if runs_worker_image(cfg, stage) else SECRETS_DIR


# Secret files readable by whichever user the image runs as (the Secret holds no more than
# the pod's own credentials): r--r--r--.
SECRET_FILE_MODE = 0o444


def mounts(
    cfg: PipelineConfig, run_id: str, stage: str
) -> tuple[list[dict], list[dict], dict[str, str]]:
    """(volumes, volumeMounts, env) every worker and setup pod of `stage` gets
    (docs/job-and-worker-contract.md#mounts): the credential files of Secret `secret_name` in
    the image user's ~/.cloudvolume/secrets (`secrets_dir`), readable by any user, with
    GOOGLE_APPLICATION_CREDENTIALS when `secret_files` has google-secret.json (Workload
    Identity otherwise); and the run's dataset file as the one file
    /app/datasets/dataset.yml (PCG_DATASET; `subPath`, so whatever the image ships in
    /app/datasets stays visible). Both volumes are optional: a pod of a cluster without them
    starts, and the image names the missing file (`pipeline setup` creates the Secret, the
    controller the ConfigMap before a run's first Job; a run's ConfigMap never changes, so
    that a subPath mount does not follow updates does not matter)."""
    secrets = secrets_dir(cfg, stage)
    volumes = [
        {
            "name": SECRETS_VOLUME,
            "secret": {
                "secretName": cfg.secret_name,
                "optional": True,
                "defaultMode": SECRET_FILE_MODE,
            },
        },
        {
            "name": DATASET_VOLUME,
            "configMap": {"name": dataset_config_map(cfg.graph_id, run_id), "optional": True},
        },
    ]
    dataset = f"{DATASET_DIR}/{DATASET_FILE}"
    volume_mounts = [
        {"name": SECRETS_VOLUME, "mountPath": secrets, "readOnly": True},
        {"name": DATASET_VOLUME, "mountPath": dataset, "subPath": DATASET_FILE, "readOnly": True},
    ]
    env = {DATASET_PATH: dataset}
    if GOOGLE_SECRET in cfg.secret_files:
        env[GOOGLE_CREDENTIALS] = f"{secrets}/{GOOGLE_SECRET}"
    return volumes, volume_mounts, env


def pod_volumes(
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    cfg: PipelineConfig,
    run_id: str,
    stage: str,
) -> dict[str, str]:
    """Add the stage's mounts to a pod spec and its container; returns the env they need."""
    volumes, volume_mounts, env = mounts(cfg, run_id, stage)
    pod_spec["volumes"] = volumes
    container["volumeMounts"] = volume_mounts
    return env
