"""Operators' files in the predecessor's shape, mapped to this project's. Pure: no I/O.

The predecessor (cave-pipeline 0.0.4, docs/predecessor-configs.md) ran one
`workload` at a time from one PyChunkedGraph image (`images.pcg`), named the Kubernetes
service account `workload_identity.service_account`, kept a persistent util pod, a cost
database and credential files, and read PyChunkedGraph's upper-case `data_source` keys.
`map_pipeline` and `map_dataset` turn such files into this project's shape and say, one
note per change, what was renamed (naming the new key), filled in or dropped. A file already
in the new shape passes through unchanged with no notes, so `load_config` calls them always.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from shared.config.config import (
    PREDECESSOR_PACK,
    PREDECESSOR_PROCESSES_PER_VCPU,
    JobSettings,
    Ramp,
    Resources,
    WorkloadIdentity,
)
from shared.model.held_wait import HELD_WAIT_ENV, IMAGE_HELD_WAIT_S
from shared.model.stages import SETUP_SUFFIX, STAGE_NAMES, writes_done_markers
from shared.model.worker_contract import IMAGE_GRACE_S, PROFILER_ENV


class CompatError(ValueError):
    """A predecessor-style file the predecessor itself refused; the message names the key."""


@dataclass(frozen=True)
class Note:
    """One change of meaning: the old file's key, what it meant to the predecessor, the key
    that now carries it (or "-"), and what the new reading does."""

    old_key: str
    old_meaning: str
    new_key: str
    effect: str

    def __str__(self) -> str:
        return f"{self.old_key}: {self.effect}"


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
# Defaults of the predecessor's `job` that differ from this project's: an old file that omits
# them keeps them (its config.py Job, Ramp dataclasses).
PREDECESSOR_RAMP = {"start": 4, "factor": 2, "period": 60, "max": 256}
PREDECESSOR_MAX_FAILED_TASKS = 50
PREDECESSOR_SERVICE_ACCOUNT = "pipeline"
# Its `secret_files` paths were relative to `pipeline deploy --secrets DIR` (default `secrets`,
# in the working directory), not to pipeline.yml.
PREDECESSOR_SECRETS_DIR = "secrets"
# Top-level defaults equal to this project's, written out so an imported file keeps them.
_SAME_DEFAULTS = {"namespace": "default", "secret_name": "cloud-volume-secrets"}
_PREDECESSOR_ONLY = ("workload", "persistent_util", "database")
_DROPPED = {
    "workload": (
        "the one workload `pipeline deploy` ran",
        "the stages of a run follow the build DAG and are chosen at `pipeline start`",
    ),
    "persistent_util": (
        "a util pod kept running for setups and graph reads",
        "there is no util pod: setup passes run as one-shot pods",
    ),
    "database": (
        "the local cost and state database",
        "run state and costs live in Firestore, in `project`",
    ),
}
_UPPER_SOURCE = {"EDGES": "edges", "COMPONENTS": "components", "WATERSHED": "watershed"}

# The predecessor's image floor (its config.py MIN_PCG_IMAGE and image_version): older
# PyChunkedGraph images lack the worker entry point or size their pools from the node's cores.
MIN_PCG_IMAGE = "v3.2.0.dev6"
_STAGE_RANK = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "rc": 3, "c": 3}
_FINAL = max(_STAGE_RANK.values()) + 1
_VERSION_RE = re.compile(
    r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[._-]?(dev|alpha|beta|rc|a|b|c)\.?(\d+)?)?", re.IGNORECASE
)


def image_version(image: str) -> tuple[int, ...]:
    """Sortable (major, minor, patch, stage, stage number) of an image's tag, or () when the
    reference has no readable version tag (untagged, `latest`, digest-pinned), which sorts
    below every version, as the predecessor ranked them."""
    last = image.rpartition("/")[2]  # a registry host may carry a :port
    tag = last.rpartition(":")[2] if ":" in last.partition("@")[0] else ""
    match = _VERSION_RE.match(tag)
    if not match:
        return ()
    major, minor, patch, stage, stage_no = match.groups()
    rank = _STAGE_RANK.get((stage or "").lower(), _FINAL)
    return (int(major), int(minor), int(patch or 0), rank, int(stage_no or 0))


def is_pychunkedgraph_image(image: str) -> bool:
    """True for a PyChunkedGraph image (its repository's last path part is `pychunkedgraph`)."""
    name = image.partition("@")[0].rpartition("/")[2].partition(":")[0]
    return name.lower() == "pychunkedgraph"


def check_image_floor(key: str, image: str) -> None:
    """CompatError naming `key` unless `image` carries a version tag at or above
    MIN_PCG_IMAGE (the predecessor's rule and wording)."""
    version = image_version(image)
    if not version:
        raise CompatError(
            f"{key}: '{image}' carries no version tag; PyChunkedGraph images must be >= "
            f"{MIN_PCG_IMAGE}. A floating (`latest`) or digest-pinned reference cannot be "
            "checked, and the wrong image fails inside the pod: pin a tag"
        )
    if version < image_version(f":{MIN_PCG_IMAGE}"):
        raise CompatError(
            f"{key}: '{image}' is older than {MIN_PCG_IMAGE}, which is required: earlier "
            "images lack the worker entry point, or size their process pools from the node's "
            f"cores and CFS-throttle every pod; use {MIN_PCG_IMAGE} or later"
        )


def is_predecessor_pipeline(raw: dict[str, Any]) -> bool:
    """True when `raw` uses a key only the predecessor's `pipeline.yml` has."""
    images = raw.get("images") or {}
    identity = raw.get("workload_identity") or {}
    return (
        any(key in raw for key in _PREDECESSOR_ONLY)
        or (isinstance(images, dict) and "pcg" in images)
        or (isinstance(identity, dict) and "service_account" in identity)
    )


def map_pipeline(raw: dict[str, Any]) -> tuple[dict[str, Any], list[Note]]:
    """`pipeline.yml` in the new shape, and a note per change of meaning. Keys the file
    omits keep the predecessor's defaults. CompatError for what the predecessor refused."""
    out, notes = copy.deepcopy(raw), []
    for key in ("env", "commands", "secret_files", "images", "job"):
        if key in out and out[key] is None:  # `env:` with nothing under it
            out[key] = {}
    if not is_predecessor_pipeline(out):
        return out, notes
    for key, (meaning, why) in _DROPPED.items():
        if key in out:
            notes.append(Note(key, meaning, "-", f"dropped ({why})"))
            del out[key]
    out.setdefault("dataset", "dataset.yml")
    for key, value in _SAME_DEFAULTS.items():
        out.setdefault(key, value)
    _map_images(out, notes)
    _map_identity(out, notes)
    _map_secrets(out, notes)
    _map_custom_commands(out, notes)
    _map_job(out, out.setdefault("job", {}), notes)
    return out, notes


def _map_images(out: dict[str, Any], notes: list[Note]) -> None:
    images, commands = out.setdefault("images", {}), out.setdefault("commands", {})
    pcg = images.pop("pcg", None)
    if pcg:
        check_image_floor("images.pcg", str(pcg))
        for stage in PCG_STAGES:
            images.setdefault(stage, pcg)
        notes.append(
            Note(
                "images.pcg",
                "the PyChunkedGraph image of ingest, meshing and the migration",
                ", ".join(f"images.{s}" for s in PCG_STAGES),
                f"serves images.{', images.'.join(PCG_STAGES)} (the same image)",
            )
        )
    if not images.get("l2cache"):
        images.pop("l2cache", None)
    for stage in [s for s in (*PCG_STAGES, "l2cache") if images.get(s)]:
        default = PCG_COMMANDS.get(stage, L2CACHE_COMMAND)
        if stage in commands and stage != "l2cache" and commands[stage] != default:
            notes.append(
                Note(
                    f"commands.{stage}",
                    "ignored: the predecessor always ran the image's entry point "
                    f"{' '.join(default)}",
                    f"commands.{stage}",
                    "runs the command given (not the image's entry point)",
                )
            )
        if stage not in commands and not (out.get("workloads") or {}).get(stage):
            commands[stage] = list(default)
            notes.append(
                Note(
                    f"commands.{stage} (omitted)",
                    f"the image's entry point {' '.join(default)}",
                    f"commands.{stage}",
                    f"the image's entry point {' '.join(default)}, written out",
                )
            )


def _map_identity(out: dict[str, Any], notes: list[Note]) -> None:
    identity = out.get("workload_identity") or {}
    if "service_account" in identity:
        identity["ksa"] = identity.pop("service_account")
        notes.append(
            Note(
                "workload_identity.service_account",
                "the worker pods' Kubernetes service account",
                "workload_identity.ksa",
                "renamed workload_identity.ksa (the same service account)",
            )
        )
    elif "ksa" not in identity:
        identity["ksa"] = PREDECESSOR_SERVICE_ACCOUNT
        notes.append(
            Note(
                "workload_identity.service_account (omitted)",
                f"the predecessor's default `{PREDECESSOR_SERVICE_ACCOUNT}`",
                "workload_identity.ksa",
                f"`{PREDECESSOR_SERVICE_ACCOUNT}` kept (the new default is "
                f"{_new_defaults()['ksa']})",
            )
        )
    # The predecessor ran its setups as that one account too: keep them on it (the default
    # setup_ksa would not exist in a cluster set up for the predecessor).
    if "setup_ksa" not in identity:
        identity["setup_ksa"] = identity["ksa"]
        notes.append(
            Note(
                "workload_identity (setup pods)",
                "setup pods ran as the workers' service account",
                "workload_identity.setup_ksa",
                f"`{identity['ksa']}` (setup pods run as it too, as the predecessor's did)",
            )
        )
    out["workload_identity"] = identity


def _map_secrets(out: dict[str, Any], notes: list[Note]) -> None:
    if not out.get("secret_files") or "secrets_dir" in out:
        return
    out["secrets_dir"] = PREDECESSOR_SECRETS_DIR
    notes.append(
        Note(
            "secret_files",
            f"paths relative to `pipeline deploy --secrets` (default ./{PREDECESSOR_SECRETS_DIR}"
            " in the working directory)",
            "secrets_dir",
            f"secrets_dir: {PREDECESSOR_SECRETS_DIR} (resolved against the working directory "
            "of `pipeline setup`, as before; not against pipeline.yml's folder)",
        )
    )


def _map_custom_commands(out: dict[str, Any], notes: list[Note]) -> None:
    commands = out.get("commands") or {}
    for name in [n for n in commands if n.removesuffix(SETUP_SUFFIX) not in STAGE_NAMES]:
        del commands[name]
        notes.append(
            Note(
                f"commands.{name}",
                f"the command of a custom workload `{name}` (`pipeline -w {name} submit`)",
                "-",
                "dropped: runs follow the build DAG's stages; a custom pass runs as a "
                "workload plugin of a stage (workloads.<stage>) or outside the pipeline",
            )
        )


def _map_job(out: dict[str, Any], job: dict[str, Any], notes: list[Note]) -> None:
    for key, value in PREDECESSOR_JOB_DEFAULTS.items():
        if key not in job:
            job[key] = value
            notes.append(
                Note(
                    f"job.{key} (omitted)",
                    f"{value}, the predecessor's default",
                    f"job.{key}",
                    f"{value}, the predecessor's default, kept",
                )
            )
    new = _new_defaults()
    if "max_failed_tasks" not in job:
        job["max_failed_tasks"] = PREDECESSOR_MAX_FAILED_TASKS
        notes.append(
            Note(
                "job.max_failed_tasks (omitted)",
                f"{PREDECESSOR_MAX_FAILED_TASKS} dead tasks tolerated per layer",
                "job.max_failed_tasks",
                f"{PREDECESSOR_MAX_FAILED_TASKS} kept (the new default is "
                f"{new['max_failed_tasks']})",
            )
        )
    if job.get("ramp") is None:
        job["ramp"] = {}
    ramp = job["ramp"]
    for key, value in PREDECESSOR_RAMP.items():
        if isinstance(ramp, dict) and key not in ramp:
            ramp[key] = value
            if value != new[f"ramp.{key}"]:  # the same default is no change of meaning
                notes.append(
                    Note(
                        f"job.ramp.{key} (omitted)",
                        f"{value}, the predecessor's default",
                        f"job.ramp.{key}",
                        f"{value} kept (the new default is {new[f'ramp.{key}']:g})",
                    )
                )
    resources = job.get("resources") if isinstance(job.get("resources"), dict) else {}
    for curve in ("cpu", "memory"):
        if not resources.get(curve):
            unit = "vCPU" if curve == "cpu" else "GiB"
            notes.append(
                Note(
                    f"job.resources.{curve} (omitted)",
                    "required: the predecessor refused to submit a layer without it",
                    f"job.resources.{curve}",
                    f"this project's default curve applies ({new[curve]:g} {unit} per pod)",
                )
            )
    _map_job_block(job, "job", notes, patch=False)
    # After the block: a `pack:` given empty is dropped there and then written as omitted.
    _map_job_defaults_since_004(job, notes)
    _map_image_pods_since_004(out, notes)
    for stage, block in list((job.get("workloads") or {}).items()):
        if block is None:
            job["workloads"][stage] = {}
            continue
        if "start_layer" in block:
            _map_start_layer(out, stage, block.pop("start_layer"), notes)
        _map_job_block(block, f"job.workloads.{stage}", notes, patch=True)


def _new_defaults() -> dict[str, Any]:
    """This project's defaults the predecessor's differ from, read from the config models."""
    ramp, resources = Ramp(), Resources()
    return {
        "max_failed_tasks": JobSettings.model_fields["max_failed_tasks"].default,
        **{f"ramp.{k}": getattr(ramp, k) for k in PREDECESSOR_RAMP},
        "cpu": resources.cpu.base,
        "memory": resources.memory.base,
        "ksa": WorkloadIdentity().ksa,
    }


def _map_start_layer(out: dict[str, Any], stage: str, layer: Any, notes: list[Note]) -> None:
    where = f"job.workloads.{stage}.start_layer"
    if layer is None or int(layer) <= 2:
        notes.append(Note(where, "start at layer 2", "-", "dropped (each stage starts at layer 2)"))
        return
    out.setdefault("start_layers", {})[stage] = int(layer)
    if not writes_done_markers(out.get("workloads") or {}, stage):
        how = (
            f"trusted as before (its workers write no done markers; the run records that "
            f"layers 2..{int(layer) - 1} were not verified)"
        )
    else:
        how = f"once every chunk of layer {int(layer) - 1} is marked done"
    notes.append(
        Note(
            where,
            f"submit {stage} from layer {layer}; the layers below assumed built",
            f"start_layers.{stage}",
            f"read as start_layers.{stage}: {layer} (`pipeline start` begins {stage} at layer "
            f"{layer} {how})",
        )
    )


def _map_pack(resources: dict[str, Any], where: str, notes: list[Note]) -> None:
    """`resources.pack` as the predecessor's newest code reads it (`bool(value)`), with the
    change from 0.0.4, which ignored the key (requests were the curve's)."""
    value = resources["pack"]
    if value is None:  # `pack:` with nothing under it: the default
        del resources["pack"]
        return
    if not isinstance(value, (bool, int)):
        raise CompatError(f"{where}.resources.pack: {value!r} is not true/false")
    resources["pack"] = bool(value)
    notes.append(
        Note(
            f"{where}.resources.pack",
            "ignored by cave-pipeline 0.0.4 (requests were the curves'); fill the forced node "
            "in the predecessor's newest code",
            f"{where}.resources.pack",
            f"{str(bool(value)).lower()}: "
            + (_PACK_EFFECT if value else "requests are the curves', as in 0.0.4"),
        )
    )


_PACK_EFFECT = (
    "curve requests grow to fill the node they force (overrides are kept), as the "
    "predecessor's newest code does; 0.0.4 asked for the curve value"
)


def _map_job_defaults_since_004(job: dict[str, Any], notes: list[Note]) -> None:
    """The predecessor's newest defaults for what 0.0.4 did not have: `resources.pack` (on)
    and `processes_per_vcpu` (2). This project's own defaults differ (off, 1), so each one a
    file omits is written into `job` (an import writes it out) with a note saying what
    changed."""
    if not isinstance(job.get("resources"), dict):
        job["resources"] = {}
    resources = job["resources"]
    if resources.get("pack") is None:
        resources["pack"] = PREDECESSOR_PACK
        notes.append(
            Note(
                "job.resources.pack (omitted)",
                "not a key of cave-pipeline 0.0.4: requests were the curves'",
                "job.resources.pack",
                f"true, the predecessor's newest default, written out: {_PACK_EFFECT}",
            )
        )
    if job.get("processes_per_vcpu") is None:
        job["processes_per_vcpu"] = PREDECESSOR_PROCESSES_PER_VCPU
        notes.append(
            Note(
                "job.processes_per_vcpu (omitted)",
                "not a key of cave-pipeline 0.0.4: PCG_N_PROCESSES was the whole billed vCPU",
                "job.processes_per_vcpu",
                f"{PREDECESSOR_PROCESSES_PER_VCPU}, the predecessor's newest default, written "
                f"out: PCG_N_PROCESSES = {PREDECESSOR_PROCESSES_PER_VCPU} x the whole billed "
                "vCPU (twice 0.0.4's pools; memory per process halves)",
            )
        )


def _map_image_pods_since_004(out: dict[str, Any], notes: list[Note]) -> None:
    """What the pods of an image's entry point get that 0.0.4's did not (no key of the file
    changes, the pods do): a note each, so an import says so."""
    if not any(s in (out.get("commands") or {}) for s in (*PCG_STAGES, "l2cache")):
        return
    env = out.get("env") or {}
    notes.append(
        Note(
            "(image pods) terminationGracePeriodSeconds",
            "not set: Kubernetes' 30 s (Autopilot's Spot notice, 25 s)",
            "-",
            f"{IMAGE_GRACE_S} s, the predecessor's newest: the images' harness installs no "
            "SIGTERM handler, so a longer grace only delays every teardown",
        )
    )
    if PROFILER_ENV not in env:
        notes.append(
            Note(
                f"env.{PROFILER_ENV} (omitted)",
                "not set: the image's own default (on in some PyChunkedGraph versions)",
                f"env.{PROFILER_ENV}",
                "0 in the images' pods (set it in env: to profile)",
            )
        )
    if HELD_WAIT_ENV not in env:
        notes.append(
            Note(
                f"env.{HELD_WAIT_ENV} (omitted)",
                f"not set: the image's {IMAGE_HELD_WAIT_S:g} s, shorter than a killed pod's "
                "3-minute claim, so each preemption spent a retry",
                f"env.{HELD_WAIT_ENV}",
                "2 x (claim lifetime + a poll) in the ingest pods, 380 s by default "
                "(docs/images-chunk-lock.md#held-chunks)",
            )
        )


def _map_job_block(block: dict[str, Any], where: str, notes: list[Note], patch: bool) -> None:
    resources = block.get("resources")
    if not isinstance(resources, dict):
        return
    if "pack" in resources:
        _map_pack(resources, where, notes)
    for curve_name in ("cpu", "memory"):
        curve = resources.get(curve_name)
        # The predecessor's "uncapped": omitted in `job`; in a workload block `max: 0` stays,
        # and lifts the job's cap in the merge, as before.
        if isinstance(curve, dict) and curve.get("max") == 0 and not patch:
            del curve["max"]
            notes.append(
                Note(
                    f"{where}.resources.{curve_name}.max: 0",
                    "uncapped",
                    f"{where}.resources.{curve_name}.max",
                    "uncapped as before (written as omitted)",
                )
            )
    overrides = resources.get("overrides")
    if isinstance(overrides, dict):
        resources["overrides"] = {int(k): v for k, v in overrides.items()}


def map_dataset(raw: dict[str, Any]) -> tuple[dict[str, Any], list[Note]]:
    """The dataset file in the new shape, and the notes on what changed. PyChunkedGraph's
    other upper-case `data_source` keys (e.g. DATA_VERSION, CV_MIP) pass through."""
    out, notes = copy.deepcopy(raw), []
    source = out.get("data_source")
    if isinstance(source, dict):
        for upper, lower in _UPPER_SOURCE.items():
            if upper in source:
                source[lower] = source.pop(upper)
                notes.append(
                    Note(
                        f"data_source.{upper}",
                        f"PyChunkedGraph's {upper}",
                        f"data_source.{lower}",
                        f"read as data_source.{lower} (PyChunkedGraph's images get {upper})",
                    )
                )
    return out, notes
