"""`pipeline setup`'s Secret: the pods' credential files (`secret_files`: file name in the pod
-> local file, relative to `secrets_dir` when set, else to pipeline.yml), written to the
cluster the CLI talks to (a local stack's Kubernetes, else GKE)."""

from __future__ import annotations

from pathlib import Path

import click

from adapters import wiring
from scripts import cluster_access
from shared.config.config import PipelineConfig
from shared.jobs.setup_job import secret_manifest
from shared.model.worker_contract import CAVE_SECRET
from shared.ports.cluster import ClusterError


def read_secret_files(cfg: PipelineConfig) -> dict[str, bytes]:
    """The contents of `secret_files`; ClickException names a missing file and the key."""
    base = Path(cfg.source_path).parent if cfg.source_path else Path.cwd()
    if cfg.secrets_dir:  # relative to the working directory, as the predecessor's --secrets
        base = Path(cfg.secrets_dir).expanduser().resolve()
    out = {}
    for name, local in cfg.secret_files.items():
        path = (base / local).resolve()
        try:
            out[name] = path.read_bytes()
        except OSError as e:
            where = f" (under secrets_dir {cfg.secrets_dir!r})" if cfg.secrets_dir else ""
            raise click.ClickException(
                f"secret_files.{name}: {path}{where} cannot be read ({e.strerror or e})"
            ) from None
    return out


def apply_secret(cfg: PipelineConfig, services: wiring.CliServices | None = None) -> str:
    """Create or replace the Secret through the CLI's Secret writer (`services`, default
    `wiring.cli_services()`); returns what was done, for the operator."""
    manifest = secret_manifest(cfg, read_secret_files(cfg))
    files = ", ".join(manifest["data"])
    placeholder = "" if CAVE_SECRET in cfg.secret_files else f" ({CAVE_SECRET}: a placeholder)"
    try:
        cluster_access.secret_writer(cfg.namespace, services=services).apply_secret(manifest)
        where = f"namespace {cfg.namespace}"
    except ClusterError as e:
        raise click.ClickException(f"Secret {cfg.secret_name}: {e}") from None
    return f"secret {cfg.secret_name} ready in {where}: {files}{placeholder}"
