"""The graph's registration with CAVE's auth service (sticky_auth), from the dataset's
`cave_config` block, as the predecessor registers on deploy
(docs/setup-passes.md#cave-registration).

`POST {host}/sticky_auth/api/v1/service/{service}/table/{graph}/dataset/{dataset}` with the
CAVE token as a Bearer maps the graph's table to the dataset, so the graph's graphene volume is
readable through CAVE. middle_auth (the service behind sticky_auth) keeps one mapping per
(service, table): a second POST of it answers 422 "Table mapping already exists", which is
success here once `GET .../table/{graph}/dataset` names the same dataset. Best effort: a failed
registration never stops the build; `pipeline start` prints it and commits the
`cave_registration_failed` alert (notify) into the run's outbox.

Pure: the request, the outcome of an answer, the alert's body. The HTTP call is
`adapters.cave.sticky_auth`, through the `CaveAuth` port (shared.ports.cave_auth).
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import Enum
from typing import Any

from shared.config.config import PipelineConfig
from shared.model.worker_contract import CAVE_SECRET
from shared.ports.cave_auth import Answer, CaveRegistration

ALERT_KIND = "cave_registration_failed"
DEFAULT_SERVICE = "pychunkedgraph"  # the predecessor's default; rarely differs


class Outcome(Enum):
    """How a registration went."""

    REGISTERED = "registered"  # 200: the mapping was made now
    ALREADY = "already registered"  # 422, and the mapping names our dataset
    FAILED = "failed"  # anything else: the build goes on, the alert says why


class CaveConfigIncomplete(ValueError):
    """`cave_config` is set but lacks `host` or `dataset`: nothing can be registered."""


def registration_for(cfg: PipelineConfig) -> CaveRegistration | None:
    """The registration the dataset's `cave_config` asks for; None without the block.
    CaveConfigIncomplete names the keys it lacks."""
    cc = cfg.ds.cave_config
    if cc is None:
        return None
    lacking = [k for k in ("host", "dataset") if not cc.get(k)]
    if lacking:
        raise CaveConfigIncomplete(
            f"dataset cave_config: no {' or '.join(lacking)}; the graph is not registered with "
            "CAVE (give cave_config.host, e.g. https://global.daf-apis.com, and "
            "cave_config.dataset)"
        )
    return CaveRegistration(
        host=str(cc["host"]),
        dataset=str(cc["dataset"]),
        service=str(cc.get("service") or DEFAULT_SERVICE),
        table=cfg.graph_id,
    )


class TokenMissing(ValueError):
    """No usable CAVE token: the message says where it was looked for."""


def token_from_secret(files: dict[str, bytes]) -> str:
    """The token of the CAVE secret (`secret_files`' cave-secret.json, `{"token": ...}`)."""
    raw = files.get(CAVE_SECRET)
    if raw is None:
        raise TokenMissing(
            f"no {CAVE_SECRET} in secret_files: the CAVE token registers the graph (add "
            f'secret_files.{CAVE_SECRET}: a file holding {{"token": "..."}})'
        )
    try:
        token = json.loads(raw)["token"]
    except (ValueError, KeyError, TypeError):
        raise TokenMissing(
            f'secret_files.{CAVE_SECRET}: not a JSON object with a "token"'
        ) from None
    if not isinstance(token, str) or not token or token == "placeholder":
        raise TokenMissing(f"secret_files.{CAVE_SECRET}: the token is empty or a placeholder")
    return token


def outcome(reg: CaveRegistration, answer: Answer) -> tuple[Outcome, str]:
    """The outcome of `answer` and a line saying it (the reason, for a failure)."""
    if answer.status in (200, 201):
        return Outcome.REGISTERED, f"graph {reg.table} registered with CAVE dataset {reg.dataset}"
    if answer.status == 422 and answer.mapped_to == reg.dataset:
        return (
            Outcome.ALREADY,
            f"graph {reg.table} already registered with CAVE dataset {reg.dataset}",
        )
    if answer.status == 422:
        other = answer.mapped_to or "a dataset that could not be read"
        why = f"the table is already mapped to {other}, not {reg.dataset} (one mapping per table)"
    elif answer.status == 404:
        why = f"CAVE has no dataset {reg.dataset!r} ({answer.text.strip()[:200]})"
    elif answer.status in (401, 403):
        why = (
            f"the CAVE token was refused (HTTP {answer.status}; registering needs an admin's token)"
        )
    else:
        why = f"HTTP {answer.status} {answer.text.strip()[:200]}"
    return Outcome.FAILED, f"CAVE registration of {reg.table} failed: {why}"


def unreachable(reg: CaveRegistration, error: str) -> tuple[Outcome, str]:
    """The outcome when sticky_auth did not answer at all."""
    return (
        Outcome.FAILED,
        f"CAVE registration of {reg.table} failed: {reg.host} did not answer ({error})",
    )


def failure_alert(
    run_id: str, graph_id: str, reason: str, reg: CaveRegistration | None, now: datetime
) -> dict[str, Any]:
    """The `cave_registration_failed` alert's body (run-wide: no stage or layer)."""
    fix = (
        f"the build goes on; register by hand: {reg.by_hand()}"
        if reg is not None
        else "the build goes on; complete cave_config (host, dataset) and register by hand"
    )
    return {
        "kind": ALERT_KIND,
        "run_id": run_id,
        "graph_id": graph_id,
        "stage": "",
        "layer": 0,
        "at": now.isoformat(),
        "reason": reason[:4096],
        "url": reg.url if reg is not None else "",
        "fix": fix,
    }
