"""The alert outbox: alerts committed with the run's state, published after the act.

A reconcile commits its alerts into the run's outbox in the same write as the new state
(`RunStore.commit`), so none is lost and none is decided twice. Publishing them is the
reconcile's last step (docs/controller.md): each entry is **taken** under a precondition
before its publish (of concurrent publishers one wins), and marked sent after it; a publisher
that dies in between leaves a take that lapses (the store's `ALERT_TAKE_S`), so delivery is
at least once, with the entry's id in the body and the `alert_id` attribute for subscribers
to dedupe on.

Before its publish an entry is completed from the cluster, best effort (the alert matters
more than its detail):

- the log tails of its failed batches (or of a failed setup's pod), from the pods the
  reconcile observed where it saw them, else listed;
- a `claim_lost` check (shared.control.alerts.claim_lost_check) reads its pods' logs: published as
  the `claim_lost` alert when a worker logged a lost chunk claim, else dropped unsent.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from shared.control.alerts import (
    LOG_TAIL_LINES,
    claim_lost_logs,
    tail_requests,
    with_batch_verdicts,
    with_claim_lost,
    with_log_tails,
)
from shared.control.batch_failures import Attempt, classify
from shared.control.controller_log import log_json, log_published_alert
from shared.ports.cluster import ClusterReader, PodInfo
from shared.ports.run_store import AlertOutbox

log = logging.getLogger("cave_pipeline.outbox")

AlertPublisher = Callable[[str, dict[str, Any]], None]
CLAIM_LOST_LOG_LINES = 300  # of a failed pod's log, where its worker reports a lost claim
_EPOCH = datetime.min.replace(tzinfo=UTC)


class Outbox:
    """Publishes a run's outbox through `publish_alert` (kind, body); reads pod logs from
    `cluster` to complete the entries. `alerts`: the run store's outbox role."""

    def __init__(
        self, alerts: AlertOutbox, cluster: ClusterReader, publish_alert: AlertPublisher
    ) -> None:
        self.alerts, self.cluster, self.publish_alert = alerts, cluster, publish_alert

    def publish(self, run_id: str, observed: Mapping[str, list[PodInfo]] | None = None) -> int:
        """Publish the run's unsent entries; the number published. `observed`: the pods a
        reconcile just listed, by Job name (their log tails need no second listing). A
        failed publish gives its entry back (the next publish sends it) and raises."""
        holder = uuid.uuid4().hex
        sent: list[str] = []
        completed: dict[str, dict[str, Any]] = {}  # bodies the publish completed
        dropped: list[str] = []
        for alert in self.alerts.unsent_alerts(run_id):
            if not self.alerts.take_alert(run_id, alert, holder):
                continue  # another reconcile is publishing it
            body = self._completed(run_id, alert.body, observed or {})
            if body is None:
                dropped.append(alert.alert_id)  # a claim_lost check that found none
                continue
            published = {**body, "alert_id": alert.alert_id}
            try:
                self.publish_alert(alert.kind, published)
            except Exception:
                self.alerts.give_back_alert(run_id, alert.alert_id)
                raise
            # After the publish, so an entry means the alert left (a failed publish is given
            # back and logs again when retried): the log-based policies notify from it.
            log_published_alert(log, alert.kind, published)
            sent.append(alert.alert_id)
            if body != alert.body:
                completed[alert.alert_id] = body
        self.alerts.mark_alerts_sent(run_id, sent, completed)
        if dropped:
            self.alerts.discard_alerts(run_id, dropped)
        return len(sent)

    def _completed(
        self, run_id: str, body: dict[str, Any], observed: Mapping[str, list[PodInfo]]
    ) -> dict[str, Any] | None:
        """The body as published: log tails filled, a claim_lost check decided (None: drop)."""
        pods = claim_lost_logs(body)
        if pods:
            logs = {p: text for p in pods if (text := self._pod_log(run_id, p)) is not None}
            return with_claim_lost(body, logs)
        wanted = tail_requests(body)
        if not wanted:
            return body
        if body.get("kind") != "failed_indexes":
            tails = {i: self._log_tail(run_id, job, i, observed.get(job)) for job, i in wanted}
            return with_log_tails(body, tails)
        # Every attempt of each failed batch: the latest one's tail, and whether they all
        # failed the same way (bad input where the stage never exits 42: batch_failures).
        attempts = {i: self._attempts(run_id, job, i, observed.get(job)) for job, i in wanted}
        tails = {i: a[-1].log_tail if a else "" for i, a in attempts.items()}
        verdicts = {i: classify(a) for i, a in attempts.items() if a}
        return with_batch_verdicts(with_log_tails(body, tails), verdicts)

    def _pod_log(self, run_id: str, pod: str) -> str | None:
        """A claim_lost candidate's log; None if unreadable (a pod gone: skipped)."""
        try:
            return self.cluster.pod_log(pod, CLAIM_LOST_LOG_LINES)
        except Exception as e:  # noqa: BLE001 - the alert is a courtesy
            _log("WARNING", "pod log unavailable", run=run_id, pod=pod, error=str(e))
            return None

    def _attempts(
        self, run_id: str, job: str, index: int, seen: list[PodInfo] | None
    ) -> list[Attempt]:
        """The failed attempts of a Job index, oldest first, each with its log tail (""
        where unreadable: a pod gone). Best effort: no error here fails the reconcile."""
        try:
            pods = [p for p in seen or () if p.index == index]
            if not pods:
                pods = self.cluster.list_pods(job, index)
        except Exception as e:  # noqa: BLE001 - the alert is a courtesy
            _log("WARNING", "attempts unavailable", run=run_id, job=job, index=index, error=str(e))
            return []
        failed = sorted((p for p in pods if p.phase == "Failed"), key=lambda p: p.created or _EPOCH)
        return [Attempt(p.exit_code, self._tail_of(run_id, p.name)) for p in failed]

    def _tail_of(self, run_id: str, pod: str) -> str:
        try:
            return self.cluster.pod_log(pod, LOG_TAIL_LINES)
        except Exception as e:  # noqa: BLE001 - any failure leaves the tail empty
            _log("WARNING", "log tail unavailable", run=run_id, pod=pod, error=str(e))
            return ""

    def _log_tail(self, run_id: str, job: str, index: int, seen: list[PodInfo] | None) -> str:
        """The latest pod's log tail of a Job index; "" if gone or unreadable. The pods the
        reconcile observed of the Job are used where they include the index; else they are
        listed. Best effort: no error here fails the reconcile."""
        try:
            pods = [p for p in seen or () if p.index == index]
            if not pods:
                pods = self.cluster.list_pods(job, index)
            if not pods:
                return ""
            latest = max(pods, key=lambda p: p.created or _EPOCH)
            return self.cluster.pod_log(latest.name, LOG_TAIL_LINES)
        except Exception as e:  # noqa: BLE001 - any failure leaves the tail empty
            _log("WARNING", "log tail unavailable", run=run_id, job=job, index=index, error=str(e))
            return ""


def _log(severity: str, message: str, **fields: Any) -> None:
    log_json(log, severity, message, **fields)
