"""What a config's build needs of the project, computed from the config alone: the vCPUs of
its largest planned layer, the data paths it reads, the images it pulls. Pure module."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from shared.config.config import PipelineConfig
from shared.config.stage_selection import default_stages, stage_layers
from shared.jobs.layer_spec import layer_spec


@dataclass(frozen=True)
class LayerNeed:
    """The vCPUs one layer requests at its ramp's ceiling: min(ramp.max, its pods) x vCPU."""

    stage: str
    layer: int
    pods: int
    vcpu_per_pod: float
    spot: bool

    @property
    def vcpus(self) -> float:
        return self.pods * self.vcpu_per_pod


def largest_layer(cfg: PipelineConfig) -> LayerNeed:
    """The planned layer (of the dataset's default build) that requests the most vCPUs at
    once, counted as the controller runs it: `ramp.max` pods (fewer if the layer has fewer
    batches) at the layer's snapped vCPU (shared.jobs.layer_spec)."""
    best: LayerNeed | None = None
    for stage in default_stages(cfg):
        job = cfg.job.for_stage(stage)
        for layer in stage_layers(cfg, stage):
            spec = layer_spec(cfg, stage, layer)
            pods = max(1, min(job.ramp.max, spec.completions))
            need = LayerNeed(stage, layer, pods, spec.requests.cpu, job.spot)
            if best is None or need.vcpus > best.vcpus:
                best = need
    assert best is not None, "every dataset has an ingest stage with layer 2"
    return best


def planned_vcpus(cfg: PipelineConfig) -> tuple[float, LayerNeed]:
    """The vCPUs the build may request at once: its largest layer, capped by
    `controller.max_vcpus` when set; and that layer."""
    need = largest_layer(cfg)
    cap = cfg.controller.max_vcpus
    return (min(need.vcpus, cap) if cap is not None else need.vcpus), need


@dataclass(frozen=True)
class DataPath:
    """A location the workers read: `key` is the dataset key naming it; `info` whether it is a
    precomputed volume (an `info` file at its root) or a folder of files."""

    key: str
    url: str
    info: bool


def data_paths(cfg: PipelineConfig) -> list[DataPath]:
    """The dataset's input locations (empty keys left out)."""
    source = cfg.ds.data_source
    paths = [
        DataPath("data_source.watershed", source.watershed, True),
        DataPath("data_source.edges", source.edges, False),
        DataPath("data_source.components", source.components, False),
    ]
    agglomeration = (cfg.ds.ingest_config or {}).get("AGGLOMERATION")
    if isinstance(agglomeration, str):
        paths.append(DataPath("ingest_config.AGGLOMERATION", agglomeration, False))
    return [p for p in paths if p.url]


# The inputs every build reads: the segmentation each stage starts from (ingest builds the
# graph from it; the demo's passes and PyChunkedGraph's meshing read it again).
REQUIRED_INPUTS = ("data_source.watershed",)


def empty_inputs(cfg: PipelineConfig) -> list[str]:
    """The required dataset keys (REQUIRED_INPUTS) that are empty or not given."""
    source = cfg.ds.data_source
    given = {"data_source.watershed": source.watershed}
    return [key for key in REQUIRED_INPUTS if not str(given[key] or "").strip()]


def empty_input_fix(cfg: PipelineConfig) -> str:
    """How to give an empty input: the dataset file to edit, or the demo's data."""
    path = cfg.dataset
    if path and cfg.source_path and not PurePath(path).is_absolute():
        path = str(PurePath(cfg.source_path).parent / path)
    where = f"in {path}" if path else "in the dataset file"
    return (
        f"set it {where} to the segmentation's location (for the demo's volume: `pipeline demo "
        "data DIR`, which writes it and a config pointing at it, then `-c DIR/pipeline.yml`)"
    )


def images(cfg: PipelineConfig) -> dict[str, str]:
    """stage -> image of the stages the default build runs (each image once)."""
    return {s: cfg.images[s] for s in default_stages(cfg) if s in cfg.images}
