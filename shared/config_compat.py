"""Operators' files in the predecessor's shape, mapped to this project's. Pure: no I/O.

The predecessor (cave-pipeline 0.0.4, reference/pcg-worker-contract.md section 5) ran one
`workload` at a time from one PyChunkedGraph image (`images.pcg`), named the Kubernetes
service account `workload_identity.service_account`, kept a persistent util pod, a cost
database and credential files, and read PyChunkedGraph's upper-case `data_source` keys.
`map_pipeline` and `map_dataset` turn such files into this project's shape and say, one
note per change, what was renamed (naming the new key), filled in or dropped. A file already
in the new shape passes through unchanged with no notes, so `load_config` calls them always.
"""

from __future__ import annotations

import copy
from typing import Any

# The images' own entry points (the predecessor's defaults for `commands`).
PCG_COMMANDS = {
    "ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"],
    "meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"],
    "migrate": ["python", "-m", "pychunkedgraph.pipeline.migrate"],
    "migrate_cleanup": ["python", "-m", "pychunkedgraph.pipeline.migrate", "--clean"],
}
L2CACHE_COMMAND = ["python", "-m", "pcgl2cache.pipeline.l2cache"]
PCG_STAGES = tuple(PCG_COMMANDS)
# The predecessor's defaults that decide which chunks each pod builds: a half-built graph is
# finished with the same seed and batch size, so a file that relied on them keeps them.
PREDECESSOR_JOB_DEFAULTS = {"perm_seed": 0, "batch_size": 1000}
_PREDECESSOR_ONLY = ("workload", "persistent_util", "database")
_DROPPED = {
    "workload": "the stages of a run follow the build DAG and are chosen at `pipeline start`",
    "persistent_util": "there is no util pod: setup passes run as one-shot pods",
    "database": "run state and costs live in Firestore, in `project`",
}
_UPPER_SOURCE = {"EDGES": "edges", "COMPONENTS": "components", "WATERSHED": "watershed"}


def is_predecessor_pipeline(raw: dict[str, Any]) -> bool:
    """True when `raw` uses a key only the predecessor's `pipeline.yml` has."""
    images = raw.get("images") or {}
    identity = raw.get("workload_identity") or {}
    return (
        any(key in raw for key in _PREDECESSOR_ONLY)
        or (isinstance(images, dict) and "pcg" in images)
        or (isinstance(identity, dict) and "service_account" in identity)
    )


def map_pipeline(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`pipeline.yml` in the new shape, and the notes on what changed."""
    out, notes = copy.deepcopy(raw), []
    for key in ("env", "commands", "secret_files", "images", "job"):
        if key in out and out[key] is None:  # `env:` with nothing under it
            out[key] = {}
    if not is_predecessor_pipeline(out):
        return out, notes
    for key, why in _DROPPED.items():
        if key in out:
            notes.append(f"{key}: dropped ({why})")
            del out[key]
    out.setdefault("dataset", "dataset.yml")
    _map_images(out, notes)
    identity = out.get("workload_identity") or {}
    if "service_account" in identity:
        identity["ksa"] = identity.pop("service_account")
        # The predecessor ran its setups as that one account too: keep them on it (the
        # default setup_ksa would not exist in a cluster set up for the predecessor).
        identity.setdefault("setup_ksa", identity["ksa"])
        out["workload_identity"] = identity
        notes.append(
            "workload_identity.service_account: renamed workload_identity.ksa; setup pods "
            "run as it too (workload_identity.setup_ksa), as the predecessor's did"
        )
    _map_job(out, out.setdefault("job", {}), notes)
    return out, notes


def _map_images(out: dict[str, Any], notes: list[str]) -> None:
    images, commands = out.setdefault("images", {}), out.setdefault("commands", {})
    pcg = images.pop("pcg", None)
    if pcg:
        for stage in PCG_STAGES:
            images.setdefault(stage, pcg)
        notes.append(f"images.pcg: serves images.{', images.'.join(PCG_STAGES)}")
    if not images.get("l2cache"):
        images.pop("l2cache", None)
    for stage in [s for s in (*PCG_STAGES, "l2cache") if images.get(s)]:
        if stage not in commands and not (out.get("workloads") or {}).get(stage):
            commands[stage] = list(PCG_COMMANDS.get(stage, L2CACHE_COMMAND))
            notes.append(f"commands.{stage}: the image's entry point {' '.join(commands[stage])}")


def _map_job(out: dict[str, Any], job: dict[str, Any], notes: list[str]) -> None:
    for key, value in PREDECESSOR_JOB_DEFAULTS.items():
        if key not in job:
            job[key] = value
            notes.append(f"job.{key}: {value}, the predecessor's default, kept")
    _map_job_block(job, "job", notes)
    for stage, block in list((job.get("workloads") or {}).items()):
        if block is None:
            job["workloads"][stage] = {}
            continue
        if "start_layer" in block:
            layer = block.pop("start_layer")
            if layer is not None and int(layer) > 2:
                out.setdefault("start_layers", {})[stage] = int(layer)
                notes.append(
                    f"job.workloads.{stage}.start_layer: read as start_layers.{stage}: {layer} "
                    f"(`pipeline start` begins {stage} at layer {layer} once every chunk of "
                    f"layer {int(layer) - 1} is marked done)"
                )
            else:
                notes.append(
                    f"job.workloads.{stage}.start_layer: dropped (each stage starts at layer 2)"
                )
        _map_job_block(block, f"job.workloads.{stage}", notes)


def _map_job_block(block: dict[str, Any], where: str, notes: list[str]) -> None:
    resources = block.get("resources")
    if not isinstance(resources, dict):
        return
    if "pack" in resources:
        del resources["pack"]
        notes.append(f"{where}.resources.pack: dropped (Autopilot places pods itself)")
    for curve_name in ("cpu", "memory"):
        curve = resources.get(curve_name)
        if isinstance(curve, dict) and curve.get("max") == 0:  # the predecessor's "uncapped"
            del curve["max"]
    overrides = resources.get("overrides")
    if isinstance(overrides, dict):
        resources["overrides"] = {int(k): v for k, v in overrides.items()}


def map_dataset(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The dataset file in the new shape, and the notes on what changed. PyChunkedGraph's
    other upper-case `data_source` keys (e.g. DATA_VERSION, CV_MIP) pass through."""
    out, notes = copy.deepcopy(raw), []
    source = out.get("data_source")
    if isinstance(source, dict):
        for upper, lower in _UPPER_SOURCE.items():
            if upper in source:
                source[lower] = source.pop(upper)
                notes.append(f"data_source.{upper}: read as data_source.{lower}")
    return out, notes
