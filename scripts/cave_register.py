"""`pipeline start`'s CAVE registration: the dataset's `cave_config` registers the graph with
sticky_auth, best effort, with the token of the CAVE secret
(docs/setup-passes.md#cave-registration). A failure never stops the start: it is returned for
the caller to print and alert."""

from __future__ import annotations

import logging

import click

from shared.config.config import PipelineConfig
from shared.operate.cave_registration import (
    CaveConfigIncomplete,
    Outcome,
    TokenMissing,
    outcome,
    registration_for,
    token_from_secret,
    unreachable,
)
from shared.ports.cave_auth import CaveAuth, CaveRegistration, CaveUnreachableError

log = logging.getLogger("cave_pipeline.cave")


def register_with_cave(
    cfg: PipelineConfig, auth: CaveAuth | None = None
) -> tuple[Outcome, str, CaveRegistration | None] | None:
    """Register the graph as `cave_config` asks: the outcome, a line saying it, and the
    registration (None when the block is incomplete); None without a `cave_config` block.
    `auth`: sticky_auth (default: `adapters.wiring.cave_auth`)."""
    from scripts.secret_files import read_secret_files

    try:
        reg = registration_for(cfg)
    except CaveConfigIncomplete as e:
        return _failed(str(e), None)
    if reg is None:
        return None
    try:
        token = token_from_secret(read_secret_files(cfg))
    except (TokenMissing, click.ClickException) as e:
        return _failed(f"CAVE registration of {reg.table} not tried: {e}", reg)
    if auth is None:
        from adapters.wiring import cave_auth

        auth = cave_auth()
    try:
        result, line = outcome(reg, auth.register(reg, token))
    except CaveUnreachableError as e:
        result, line = unreachable(reg, str(e))
    if result is Outcome.FAILED:
        return _failed(line, reg)
    log.info(line)
    return result, line, reg


def _failed(
    line: str, reg: CaveRegistration | None
) -> tuple[Outcome, str, CaveRegistration | None]:
    log.warning(line)
    return Outcome.FAILED, line, reg
