"""How urgently each alert kind needs a person: one table, read by the controller's alert log
entry (`alert_log_entry`), mirrored by terraform/alerts.tf (`local.alert_severities`) and
docs/alerts.md; tests/unit/deploy/test_alert_policies.py holds the three together.

- page: the build is stopped or the controller is failing; someone acts tonight.
- notify: the build goes on but degraded or costs more; someone looks in the morning.
- inform: nothing is wrong; the news is for whoever watches.

Terraform can override a kind's severity per deployment (`alert_severity_overrides`) without
a code change: the log entry carries the code's default, the policies route by `kind`.
Pure module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Severity(Enum):
    """An alert kind's urgency; the value is the name terraform and the docs use."""

    PAGE = "page"
    NOTIFY = "notify"
    INFORM = "inform"


class UnknownAlertKindError(KeyError):
    """An alert kind with no severity: add it to SEVERITIES (and terraform/alerts.tf,
    docs/alerts.md), or the alert would reach nobody."""


# Every kind the controller publishes (shared.reconcile.*, shared.control.alerts,
# shared.control.dead_letters). The issue fixes the named ones; the others are decided here:
# a failed canary lets the layer go on as configured and a lost claim is redone
# automatically, so both are morning news, not a page; root_check_failed (the built graph
# failed its own tests) pages, as a failed layer does; a failed CAVE registration never stops
# the build (it is done by hand), so it is morning news.
SEVERITIES: dict[str, Severity] = {
    "layer_failed": Severity.PAGE,
    "setup_failed": Severity.PAGE,
    "run_unhealthy": Severity.PAGE,
    "message_dead_lettered": Severity.PAGE,
    "layer_incomplete": Severity.PAGE,
    "root_check_failed": Severity.PAGE,
    "failed_indexes": Severity.NOTIFY,
    "oom_killed": Severity.NOTIFY,
    "pod_hung": Severity.NOTIFY,
    "index_evicted_repeatedly": Severity.NOTIFY,
    "budget_reached": Severity.NOTIFY,
    "layer_stalled": Severity.NOTIFY,
    "canary_failed": Severity.NOTIFY,
    "claim_lost": Severity.NOTIFY,
    "cave_registration_failed": Severity.NOTIFY,
    "approval_needed": Severity.INFORM,
    "run_finished": Severity.INFORM,
}

# Cloud Logging's own `severity` (the entry's level) of an alert's log entry. Kept below ERROR
# so the function-errors policy (severity>=ERROR) never fires on an alert the controller
# reported correctly.
LOG_LEVELS: dict[Severity, str] = {
    Severity.PAGE: "WARNING",
    Severity.NOTIFY: "NOTICE",
    Severity.INFORM: "INFO",
}

ALERT_LOG_MESSAGE = "alert published"  # jsonPayload.message of the entry; the policies match it

# What an operator runs first, per kind, when the alert's body carries no `fix` of its own.
# {run}, {stage}, {layer}: the alert's.
DEFAULT_FIXES: dict[str, str] = {
    "layer_failed": "pipeline inspect {run} {stage} {layer}",
    "setup_failed": "pipeline inspect {run} {stage} 0",
    "run_unhealthy": "pipeline status {run}",
    "message_dead_lettered": "gcloud pubsub subscriptions pull dead-letters-operator --limit=10",
    "layer_incomplete": "pipeline verify {run}",
    "root_check_failed": "pipeline inspect {run} {stage} {layer}",
    "failed_indexes": "pipeline inspect {run} {stage} {layer}",
    "oom_killed": "pipeline inspect {run} {stage} {layer}",
    "pod_hung": "pipeline inspect {run} {stage} {layer}",
    "index_evicted_repeatedly": "pipeline inspect {run} {stage} {layer}",
    "budget_reached": "pipeline costs {run}",
    "layer_stalled": "pipeline pods {run} {stage} {layer}",
    "canary_failed": "pipeline inspect {run} {stage} {layer}",
    "claim_lost": "pipeline inspect {run} {stage} {layer}",
    "cave_registration_failed": "pipeline alerts {run}",
    "approval_needed": "pipeline approve {run} {stage} {layer}",
    "run_finished": "pipeline report {run}",
}

MAX_SUMMARY_CHARS = 300  # a notification's subject line, not a report


def severity_of(kind: str) -> Severity:
    """The severity of `kind`; raises UnknownAlertKindError for a kind not in the table."""
    try:
        return SEVERITIES[kind]
    except KeyError:
        raise UnknownAlertKindError(
            f"alert kind {kind!r} has no severity: add it to "
            "shared/control/alert_severity.py SEVERITIES, terraform/alerts.tf and docs/alerts.md"
        ) from None


@dataclass(frozen=True)
class AlertLogEntry:
    """The controller's log entry of one published alert (Cloud Logging parses it into
    jsonPayload; `level` becomes the entry's severity)."""

    level: str
    fields: dict[str, Any]


def alert_log_entry(kind: str, body: dict[str, Any]) -> AlertLogEntry:
    """The log entry of a published alert: kind, its severity (`alert_severity`: Cloud
    Logging's `severity` is the level), run, stage, layer, a one-line summary and the fix.
    A kind missing from the table is logged as a page (raising here would lose the alert's
    only notification; the test on SEVERITIES keeps the table complete)."""
    severity = SEVERITIES.get(kind, Severity.PAGE)
    run = str(body.get("run_id") or "")  # a dead letter's may be None
    stage = str(body.get("stage") or "")
    layer = body.get("layer", 0)
    # The body's own fix is the decision's (exact); a default only names where to look.
    fix = str(body.get("fix") or "") or DEFAULT_FIXES.get(kind, "pipeline status {run}").format(
        run=run, stage=stage, layer=layer
    )
    return AlertLogEntry(
        LOG_LEVELS[severity],
        {
            "kind": kind,
            "alert_severity": severity.value,
            "run": run,
            "stage": stage,
            "layer": layer,
            "summary": summary(kind, body),
            "fix": fix,
            "alert_id": str(body.get("alert_id", "")),
        },
    )


def summary(kind: str, body: dict[str, Any]) -> str:
    """One line saying what happened, from the body's own fields."""
    where = _where(body)
    detail = _DETAIL.get(kind, "").format_map(_Fields(body))
    text = " ".join(part for part in (kind, where) if part) + (f": {detail}" if detail else "")
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 4] + " ..."


def _where(body: dict[str, Any]) -> str:
    run, stage, layer = body.get("run_id") or "", body.get("stage") or "", body.get("layer", 0)
    if stage:
        return f"run {run} {stage} layer {layer}"
    return f"run {run}" if run else ""


class _Fields(dict[str, Any]):
    """A body for str.format_map: a field it lacks reads as "?" (a summary never fails)."""

    def __missing__(self, key: str) -> str:
        return "?"


# The detail after "kind run R stage layer N: ", per kind, from the body's fields.
_DETAIL: dict[str, str] = {
    "layer_failed": "{reason}",
    "setup_failed": "{reason}",
    "run_unhealthy": "{failures} failed reconciles in a row: {error}",
    "message_dead_lettered": "a {topic} message was not delivered after {delivery_attempts} tries",
    "layer_incomplete": "{chunks_missing} chunks not marked done",
    "root_check_failed": "the graph's own tests failed after the root chunk: {reason}",
    "failed_indexes": "{index_count} indexes failed ({indexes})",
    "oom_killed": "{pods} pods OOM-killed at {memory_request_gib} GiB",
    "pod_hung": "pod {pod} made no progress for {no_progress_s} s",
    "index_evicted_repeatedly": "{index_count} indexes evicted repeatedly",
    "budget_reached": "spend ${spend_usd} reached the budget ${budget_usd}; the run is paused",
    "layer_stalled": "no index completed for {no_progress_s} s",
    "canary_failed": "{reason}",
    "claim_lost": "{chunk_count} chunk claims lost (redone)",
    "cave_registration_failed": "{reason} (the build goes on)",
    "approval_needed": "the layer waits for `pipeline approve`",
    "run_finished": "{status}",
}
