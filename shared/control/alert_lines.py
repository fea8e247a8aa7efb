"""A run's alerts as `pipeline alerts` lists them: one line each, newest last, with its
severity, what happened and the fix (the same summary and fix as the alert's log entry and
its notification: shared.control.alert_severity). Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.control.alert_severity import SEVERITIES, Severity, alert_log_entry
from shared.control.alerts import claim_lost_logs
from shared.ports.run_store import StoredAlert


@dataclass(frozen=True)
class AlertLine:
    """One alert of a run, as listed."""

    alert_id: str
    at: datetime | None
    kind: str
    severity: Severity
    stage: str
    layer: int
    summary: str
    fix: str
    sent: bool  # False: in the outbox, not yet published

    def as_json(self) -> dict[str, Any]:
        return {
            "alert_id": self.alert_id,
            "at": self.at.isoformat() if self.at else None,
            "kind": self.kind,
            "severity": self.severity.value,
            "stage": self.stage,
            "layer": self.layer,
            "summary": self.summary,
            "fix": self.fix,
            "sent": self.sent,
        }


def alert_lines(
    alerts: Iterable[StoredAlert], kinds: frozenset[str] = frozenset()
) -> list[AlertLine]:
    """The listed lines of a run's outbox entries, oldest first (newest last), of `kinds`
    only if given. A `claim_lost` check not yet decided is left out: it may be dropped
    unsent (no lost claim logged), so it is not an alert yet."""
    out: list[AlertLine] = []
    for alert in alerts:
        if kinds and alert.kind not in kinds:
            continue
        if not alert.sent and claim_lost_logs(alert.body):
            continue
        fields = alert_log_entry(alert.kind, {**alert.body, "alert_id": alert.alert_id}).fields
        out.append(
            AlertLine(
                alert.alert_id,
                alert.created_at,
                alert.kind,
                SEVERITIES.get(alert.kind, Severity.PAGE),
                fields["stage"],
                int(fields["layer"] or 0),
                fields["summary"],
                fields["fix"],
                alert.sent,
            )
        )
    return sorted(out, key=lambda a: (a.at is None, a.at or datetime.min, a.alert_id))


def unseen(lines: list[AlertLine], seen: set[str]) -> list[AlertLine]:
    """The lines not listed yet (by alert id), in order; adds them to `seen`. An entry that
    was pending and is now sent is not listed again."""
    fresh = [a for a in lines if a.alert_id not in seen]
    seen.update(a.alert_id for a in fresh)
    return fresh
