"""The demo as the operator of an approve-mode run (:class:`AutoApprover`): it approves each
layer a set time after the layer became eligible, through `shared.operate.operator_actions.approve`
applied with `update_run` and a `kick`, exactly as `pipeline approve` does."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from shared.model.phase import Phase, RunStatus
from shared.model.state import LayerState, RunState
from shared.operate import operator_actions as ops

APPROVER = "demo-auto-approver"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class AutoApprover:
    """The demo as the operator of an approve-mode run: each layer is approved ``after_s``
    seconds after it became eligible (the layer below complete), through the operator's path:
    ``operator_actions.approve`` applied with ``store.update_run``, then a ``kick``."""

    def __init__(
        self,
        store: Any,
        kick: Callable[[str, str, str], None],
        after_s: float,
        by: str = APPROVER,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.store, self.kick, self.after_s, self.by, self.clock = store, kick, after_s, by, clock
        self.first_seen: dict[str, datetime] = {}  # when a stamp is missing: our own sighting
        self.approved: list[str] = []

    def step(self, run: RunState) -> float | None:
        """Approve the layers that are due; returns the seconds until the next one is due
        (None: no eligible layer is waiting for approval)."""
        if run.status != RunStatus.RUNNING:
            return None
        now = self.clock()
        due, wait = self._due(run, now)
        if due:
            self._approve(run.run_id, due, now)
        return wait

    def _due(self, run: RunState, now: datetime) -> tuple[list[LayerState], float | None]:
        """The eligible layers waiting for approval whose time has come, and the seconds
        until the next of the others is due (None if there is none)."""
        due: list[LayerState] = []
        wait: float | None = None
        for ls in run.ordered_layers():
            if ls.phase != Phase.WAITING or ls.approval.granted or not run.dependencies_met(ls):
                continue
            since = run.ready_since(ls) or self.first_seen.setdefault(ls.key, now)
            left = (since - now).total_seconds() + self.after_s
            if left <= 0:
                due.append(ls)
            else:
                wait = left if wait is None else min(wait, left)
        return due, wait

    def _approve(self, run_id: str, due: list[LayerState], now: datetime) -> None:
        """One update approving every due layer, then one kick."""
        keys: list[str] = []

        def mutate(state: RunState) -> None:
            for ls in due:
                keys.extend(ops.approve(state, ls.stage, [ls.layer], self.by, now))

        self.store.update_run(run_id, mutate)
        self.kick(run_id, "approve", self.by)
        self.approved += keys
