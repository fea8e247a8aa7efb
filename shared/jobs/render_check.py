"""A config's renders checked at load time: every Job its build implies, setup Jobs included.

The layer Jobs are `shared.jobs.manifest`'s, the setup Jobs `shared.jobs.setup_job`'s (which builds
on the manifest); this module renders both, so neither has to reach for the other. Pure module.
"""

from __future__ import annotations

import logging

from shared.config.config import PipelineConfig
from shared.config.stage_selection import default_stages, stage_layers
from shared.jobs.manifest import ManifestError, lock_scale_warning, render_job
from shared.jobs.setup_job import has_setup, render_setup_job
from shared.model.stages import PlanError

log = logging.getLogger(__name__)


def implied_renders(cfg: PipelineConfig) -> list[tuple[str, int]]:
    """(stage, layer) pairs the config implies: every layer of the build DAG's stages
    (`shared.model.stages`)."""
    try:
        return [(s, n) for s in default_stages(cfg) for n in stage_layers(cfg, s)]
    except PlanError as e:
        raise ManifestError(str(e)) from None


def validate_config_renders(cfg: PipelineConfig) -> None:
    """Render every implied (stage, layer) and each stage's setup Job; raise the first
    ManifestError (config load time). An unsafe `env.PCG_LOCK_EXPIRY_SCALE` is logged as a
    warning (the CLI also prints `lock_scale_warning`)."""
    warning = lock_scale_warning(cfg)
    if warning:
        log.warning("%s", warning)

    for stage, layer in implied_renders(cfg):
        render_job(cfg, stage, layer, run_id="validate", parallelism=1)
    for stage in default_stages(cfg):
        if has_setup(cfg, stage):
            render_setup_job(cfg, stage, run_id="validate")
