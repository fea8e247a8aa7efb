"""Configuration files: `pipeline.yml` plus the dataset file it names, read and validated.

The models are `shared.config.config`'s; files in the predecessor's shape are mapped first
(`shared.config.config_compat`), and a dataset without `data_source.size` gets it from its
watershed's `info` (`shared.config.precomputed_info`). The config's only reads of files.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from shared.config import config_compat
from shared.config.config import ConfigError, ConfigSourceUnreachable, Dataset, PipelineConfig
from shared.config.env_overrides import override_notes
from shared.config.key_hints import NOT_FILE_KEYS, did_you_mean, keys_at, near_key
from shared.config.precomputed_info import GridUnreachable, GridUnreadable, read_watershed_size
from shared.model.layers import layer2_shape_of, layer_count

log = logging.getLogger("cave_pipeline.config")


def _dotted(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _format_errors(path: Path, err: ValidationError, model: type[BaseModel]) -> str:
    """One line per problem, each naming its dotted key; an unknown key names the near known
    one (`job.batchsize: unknown key (did you mean job.batch_size?)`), and a required key that
    is missing names the unknown key given in its place (a misspelt `graph_config` key)."""
    errors = err.errors()
    unknown = {tuple(e["loc"]) for e in errors if e["type"] == "extra_forbidden"}
    lines = [f"{path}: invalid configuration"]
    for e in errors:
        loc, msg = tuple(e["loc"]), e["msg"]
        parent = f"{_dotted(loc[:-1])}." if len(loc) > 1 else ""
        if e["type"] == "extra_forbidden":
            msg = "unknown key" + did_you_mean(str(loc[-1]), keys_at(model, loc[:-1]), parent)
        elif e["type"] == "missing" and isinstance(e.get("input"), dict):
            known = keys_at(model, loc[:-1])
            given = [str(k) for k in e["input"] if k not in known]
            typo = near_key(str(loc[-1]), given)
            if typo is not None and (*loc[:-1], typo) not in unknown:
                lines.append(f"  {parent}{typo}: unknown key (did you mean {_dotted(loc)}?)")
        elif e["type"] == "value_error" and "error" in e.get("ctx", {}):
            msg = str(e["ctx"]["error"])  # a validator's message, without "Value error, "
            if not loc or msg.startswith(f"{_dotted(loc)}."):
                lines.append(f"  {msg}")  # it names its own key
                continue
        lines.append(f"  {_dotted(loc) or '(top level)'}: {msg}")
    return "\n".join(lines)


def read_yaml(path: Path, named_by: str = "") -> dict[str, Any]:
    """A YAML file's top-level mapping; ConfigError names the file and what is wrong, and
    where the file was named (`named_by`, e.g. "`dataset: d.yml` in /x/pipeline.yml")."""
    where = f" (named by {named_by})" if named_by else ""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found{where}") from None
    except OSError as e:  # a folder, no permission
        raise ConfigError(f"{path}: cannot be read ({e.strerror or e}){where}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_config(path: str | Path) -> PipelineConfig:
    """Load and validate `pipeline.yml` and the dataset file it names (relative to it).

    Files in the predecessor's shape are read through `shared.config.config_compat` (the notes are
    in `compat_notes`); a dataset without `data_source.size` takes it from the watershed.
    """
    path = Path(path).resolve()
    try:
        raw, notes = config_compat.map_pipeline(read_yaml(path))
    except config_compat.CompatError as e:
        raise ConfigError(f"{path}: {e}") from None
    for reserved in sorted(NOT_FILE_KEYS):
        if reserved in raw:
            raise ConfigError(f"{path}: {reserved}: unknown key (typo?)")
    try:
        cfg = PipelineConfig(**raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(path, e, PipelineConfig)) from None
    _check_pychunkedgraph_images(path, cfg)
    ds_path = (path.parent / cfg.dataset).resolve()
    ds_raw, ds_notes = config_compat.map_dataset(read_yaml(ds_path, dataset_key(cfg.dataset, path)))
    try:
        dataset = Dataset(**ds_raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(ds_path, e, Dataset)) from None
    dataset = _with_size(dataset, ds_path)
    compat = tuple(str(n) for n in (*notes, *ds_notes))
    meaning = tuple(str(n) for n in meaning_notes(cfg.env, dataset))
    for note in (*compat, *meaning):
        log.warning("%s: %s", path.name, note)
    return cfg.model_copy(
        update={
            "dataset_config": dataset,
            "source_path": str(path),
            "dataset_fingerprint": fingerprint(ds_path.read_text().encode()),
            "compat_notes": compat,
            "load_notes": meaning,
        }
    )


def fingerprint(content: bytes) -> str:
    """A file's fingerprint: the first 16 hex digits of the SHA-256 of its bytes."""
    return hashlib.sha256(content).hexdigest()[:16]


def dataset_key(dataset: str, pipeline: Path) -> str:
    """Where a dataset file is named: the `dataset:` key of `pipeline`, relative to its folder."""
    return f"`dataset: {dataset}` in {pipeline}, relative to its folder"


def _check_pychunkedgraph_images(path: Path, cfg: PipelineConfig) -> None:
    """ConfigError unless every PyChunkedGraph image is at or above the predecessor's floor
    (config_compat.MIN_PCG_IMAGE), naming the key."""
    for stage, image in cfg.images.items():
        if config_compat.is_pychunkedgraph_image(image):
            try:
                config_compat.check_image_floor(f"images.{stage}", image)
            except config_compat.CompatError as e:
                raise ConfigError(f"{path}: {e}") from None


def meaning_notes(env: dict[str, str], dataset: Dataset) -> list[config_compat.Note]:
    """What loaded files mean that differs from how they read, in either shape: `env:` keys
    that replace the controller's values, and a mesh_config.max_layer past the root (meshing
    stops at the root, as the predecessor clamped it; the file's value reaches the images
    unchanged)."""
    notes = override_notes(env)
    mesh, size = dataset.mesh_config, dataset.data_source.size
    if mesh is None or not mesh.max_layer or size is None:
        return notes
    shape = layer2_shape_of(size, dataset.graph_config.CHUNK_SIZE)
    root = layer_count(shape, dataset.graph_config.FANOUT)
    if mesh.max_layer > root:
        notes.append(
            config_compat.Note(
                "mesh_config.max_layer",
                f"{mesh.max_layer}, clamped to the root (layer {root})",
                "mesh_config.max_layer",
                f"{mesh.max_layer} is past the root (layer {root}): meshing builds layers "
                f"2..{root}",
            )
        )
    return notes


def _with_size(dataset: Dataset, ds_path: Path) -> Dataset:
    """`dataset` with `data_source.size` read from the watershed when the file has none; a
    size given that disagrees with a readable info file is refused with both numbers."""
    source = dataset.data_source
    if source.size is not None:
        try:
            found = read_watershed_size(source.watershed, ds_path.parent)
        except GridUnreadable:
            return dataset  # no info file to check against (or no network): the size stands
        if tuple(found) != tuple(source.size):
            raise ConfigError(
                f"{ds_path}: data_source.size: {list(source.size)} disagrees with the "
                f"watershed's info file ({source.watershed}: {list(found)} at mip 0); fix it, "
                "or drop data_source.size to use the info file's"
            )
        return dataset
    try:
        size = read_watershed_size(source.watershed, ds_path.parent)
    except GridUnreachable as e:  # no answer: exit 3, not a config error
        raise ConfigSourceUnreachable(
            f"{ds_path}: data_source.size: the grid cannot be read from the watershed ({e}); "
            "run the command again once it can be reached, or set data_source.size: "
            "[x, y, z] (voxels at mip 0) in the dataset file"
        ) from None
    except GridUnreadable as e:
        raise ConfigError(
            f"{ds_path}: data_source.size: the grid cannot be read from the watershed ({e}); "
            "set data_source.size: [x, y, z] (voxels at mip 0) in the dataset file"
        ) from None
    return dataset.model_copy(update={"data_source": source.model_copy(update={"size": size})})


def config_from_dict(raw: dict[str, Any], dataset: dict[str, Any]) -> PipelineConfig:
    """Build a config from already-parsed mappings (e.g. the snapshot stored with a run)."""
    try:
        cfg = PipelineConfig(**{k: v for k, v in raw.items() if k not in ("dataset_config",)})
        return cfg.model_copy(update={"dataset_config": Dataset(**dataset)})
    except ValidationError as e:
        model = PipelineConfig if e.title == PipelineConfig.__name__ else Dataset
        raise ConfigError(_format_errors(Path("<snapshot>"), e, model)) from None
