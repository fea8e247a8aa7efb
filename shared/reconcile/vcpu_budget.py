"""`controller.max_vcpus`: the vCPUs all running layers of a project's runs may request
together (pods x vCPU per pod), shared out by the reconcile. Pure module.

A pod count cap overshoots with wide pods (30 vCPU meshing pods next to 1 vCPU l2cache pods);
a vCPU cap does not. Each reconcile of a run starts from the cap less what the project's
other running runs hold (their stored parallelism x vCPU) and holds back what its own
running layers already have, so a layer that becomes eligible never takes the pods of one
already running: running layers keep theirs (and ramp up, in build order, as far as the
cap leaves room); a new layer starts only when one pod fits. Every running layer keeps at
least one pod, so the cap is exceeded only by an operator lowering it (by at most a pod
per layer) or by two runs' reconciles deciding at the same moment. A layer's running canary
(shared.reconcile.canary) holds its pods' vCPU too: it starts only when one of its pods fits, with
as many pods at once as there is room for, and keeps that parallelism until it ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared.model.phase import Phase, RunStatus
from shared.model.state import LayerState, RunState
from shared.reconcile.canary import canary_vcpus

_EPS = 1e-9  # float sums of 0.25 vCPU steps


@dataclass
class VcpuBudget:
    """What is left of the cap for this run's layers, as the reconcile walks them."""

    free: float  # vCPUs not held by anyone
    held: dict[str, float]  # this run's running layers -> vCPUs they hold now

    @classmethod
    def of(cls, max_vcpus: float | None, run: RunState, others: float) -> VcpuBudget | None:
        """The budget of one reconcile of `run`; None without a cap."""
        if max_vcpus is None:
            return None
        held = {
            ls.key: ls.job.parallelism * ls.pods.cpu_request
            for ls in run.layers.values()
            if ls.phase == Phase.RUNNING
        }
        canaries = sum(canary_vcpus(ls) for ls in run.layers.values())
        return cls(max_vcpus - others - canaries - sum(held.values()), held)

    def take_running(self, ls: LayerState, cpu: float, target: int) -> int:
        """The parallelism a running layer gets: `target` as far as the cap leaves room,
        counting what the layer holds already; at least one pod."""
        cpu = ls.pods.cpu_request or cpu  # what its pods ask; the config may have changed since
        room = self.free + self.held.pop(ls.key, 0.0)
        got = max(1, min(target, _pods(room, cpu))) if cpu > 0 else target
        self.free = room - got * cpu
        return got

    def room_for_one(self, cpu: float) -> bool:
        """Whether a new layer's first pod fits."""
        return cpu <= 0 or self.free + _EPS >= cpu

    def take_new(self, cpu: float, target: int) -> int:
        """The starting parallelism of a new layer (room_for_one checked): `target` as far
        as the cap leaves room, at least one pod."""
        got = max(1, min(target, _pods(self.free, cpu))) if cpu > 0 else target
        self.free -= got * cpu
        return got


def _pods(vcpus: float, cpu: float) -> int:
    return max(0, math.floor((vcpus + _EPS) / cpu))


def running_vcpus(runs: list[RunState]) -> float:
    """vCPUs requested by the running layers and canaries of the given runs (paused runs'
    Jobs are suspended: they hold none)."""
    return sum(
        (ls.job.parallelism * ls.pods.cpu_request if ls.phase == Phase.RUNNING else 0.0)
        + canary_vcpus(ls)
        for run in runs
        if run.status == RunStatus.RUNNING
        for ls in run.layers.values()
    )
