"""What a config's build needs of the project, computed from the config alone: the vCPUs of
its largest planned layer, the data paths it reads, the images it pulls. Pure module."""

from __future__ import annotations

from dataclasses import dataclass

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


def images(cfg: PipelineConfig) -> dict[str, str]:
    """stage -> image of the stages the default build runs (each image once)."""
    return {s: cfg.images[s] for s in default_stages(cfg) if s in cfg.images}
