"""What the controller itself costs in Google Cloud for a simulated build. Pure module.

List prices (USD, us regions, late 2025; check the pricing pages before relying on them):
Cloud Run functions $0.40 per million invocations plus $0.000024 per vCPU-second and
$0.0000025 per GiB-second (1 vCPU, 512 MiB); Firestore $0.06 per 100,000 document reads and
$0.18 per 100,000 writes; Pub/Sub $40 per TiB (1 KiB minimum per message); Cloud Scheduler
$0.10 per job-month. Free tiers are ignored (a conservative figure).
"""

from __future__ import annotations

from dataclasses import dataclass

INVOCATION_USD = 0.40 / 1e6
VCPU_SECOND_USD = 0.000024
GIB_SECOND_USD = 0.0000025
FUNCTION_GIB = 0.5
READ_USD, WRITE_USD = 0.06 / 1e5, 0.18 / 1e5
PUBSUB_USD_PER_MESSAGE = 40.0 / 2**30  # 1 KiB billed per message
SCHEDULER_MONTH_USD = 0.10
MONTH_S = 30 * 86400.0


@dataclass(frozen=True)
class ControllerCost:
    build_usd: float  # over the simulated build
    monthly_usd: float  # builds of this size back to back for 30 days

    def as_dict(self) -> dict[str, float]:
        return {"build_usd": round(self.build_usd, 4), "monthly_usd": round(self.monthly_usd, 2)}


def controller_cost(
    invocations: int,
    reads: int,
    writes: int,
    messages: int,
    wall_s: float,
    reconcile_s: float = 0.5,
) -> ControllerCost:
    """Price the controller's load; `reconcile_s` is one invocation's wall time (measured by
    bench/bench_reconcile.py: about 0.5 s at 5,000 active pods)."""
    compute = invocations * reconcile_s * (VCPU_SECOND_USD + FUNCTION_GIB * GIB_SECOND_USD)
    usd = (
        invocations * INVOCATION_USD
        + compute
        + reads * READ_USD
        + writes * WRITE_USD
        + messages * PUBSUB_USD_PER_MESSAGE
    )
    scale = MONTH_S / wall_s if wall_s > 0 else 0.0
    return ControllerCost(
        usd + SCHEDULER_MONTH_USD * wall_s / MONTH_S, usd * scale + SCHEDULER_MONTH_USD
    )
