"""The whole bill of a build, line by line, each measured or estimated. Pure module.

Beside the pods and the cluster fee (shared.money.costs), a build costs:

- **table storage**: the bytes its tables hold while it runs (Cloud Monitoring's
  `table/bytes_used` over the build), priced per GiB-month (SSD);
- **Bigtable nodes**: the instance's node count over the build above its count before it
  (an instance that autoscaled for the build); zero where the instance did not scale;
- **the controller**: function invocations and instance time, Firestore reads and writes,
  Pub/Sub messages, log volume and the scheduler job, from its own counters
  (shared.money.controller_usage).

A line is `measured` when it comes from recorded usage (pod records, Job spans, Monitoring's
series, the controller's counters) and estimated otherwise, and says what it rests on.
Prices: `shared/data/cloud-prices.csv` (source and date per price). The I/O (Monitoring) is
the caller's: series come in as arguments. See docs/bigtable-ramp-and-bill.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from shared.money.controller_usage import ControllerUsage
from shared.money.costs import RunCost
from shared.money.pricing import CloudPrice
from shared.ports.bigtable_monitor import Sample

GIB = 2.0**30  # Bigtable bills storage in binary GB
MONTH_H = 730.0  # hours in a billing month (365 x 24 / 12)
FUNCTION_VCPU, FUNCTION_GIB = 1.0, 2.0  # the functions' size (terraform/functions.tf)
RECONCILE_S = 0.5  # one reconcile's instance time when it was not measured
PUBSUB_MESSAGE_TIB = 1024 / 2.0**40  # 1 KiB billed at least per message
LOG_BYTES_PER_RECONCILE = 300  # when not counted: about one log line


@dataclass(frozen=True)
class BillLine:
    key: str  # pods, cluster_fee, table_storage, bigtable_nodes, controller
    usd: float
    measured: bool
    basis: str  # what it rests on, for an operator

    def as_dict(self) -> dict[str, Any]:
        return {"usd": self.usd, "measured": self.measured, "basis": self.basis}


@dataclass(frozen=True)
class Bill:
    lines: list[BillLine] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        return sum(line.usd for line in self.lines)

    def as_dict(self) -> dict[str, Any]:
        """`{line: {usd, measured, basis}, ..., "total_usd": ...}` (the demo's `bill`)."""
        out: dict[str, Any] = {line.key: line.as_dict() for line in self.lines}
        out["total_usd"] = self.total_usd
        return out


def pod_lines(cost: RunCost) -> list[BillLine]:
    """Autopilot: the recorded pods priced at the rate table, and the cluster fee."""
    pods = sum(lc.usd for lc in cost.layers)
    backfilled = sum(lc.backfilled_pods for lc in cost.layers)
    basis = "recorded pods' requests x runtime at Autopilot's list rates"
    if backfilled:
        basis += f" ({backfilled} pods unseen, priced at their layer's mean runtime)"
    return [
        BillLine("pods", pods, True, basis),
        BillLine("cluster_fee", cost.cluster_fee_usd, True, "the run's Job spans x the fee"),
    ]


def _mean(samples: Sequence[Sample], start: datetime, end: datetime) -> float | None:
    inside = [s.value for s in samples if start <= s.at <= end]
    return sum(inside) / len(inside) if inside else None


def storage_line(
    samples: Sequence[Sample] | None,
    start: datetime,
    end: datetime,
    price: CloudPrice,
    exact: bool = True,
    source: str = "Cloud Monitoring table/bytes_used",
    partial: str = "",
) -> BillLine:
    """The tables' mean bytes over [start, end] x the span in months x the GiB-month price.
    `exact`: the series is Bigtable's own (else an approximation, e.g. the local meter's
    bytes written); None or no point in the span: not known, $0, estimated. `partial`: why
    the series is only part of Monitoring's answer (the line is then estimated, a lower
    bound)."""
    mean = _mean(samples or [], start, end)
    if mean is None:
        return BillLine("table_storage", 0.0, False, f"no {source} series for the build: $0")
    months = max(0.0, (end - start).total_seconds()) / 3600.0 / MONTH_H
    usd = mean / GIB * months * price.usd
    basis = (
        f"{source}: mean {mean / GIB:.3g} GiB over {months * MONTH_H:.2f} h "
        f"at ${price.usd}/GiB-month"
    )
    if partial:
        basis += f"; a lower bound, Monitoring answered in part ({partial})"
    return BillLine("table_storage", usd, exact and not partial, basis)


def node_hours_above(samples: Sequence[Sample], start: datetime, end: datetime) -> float:
    """Node-hours above the count before `start` (the last point before it, else the
    first one), each point's count holding until the next point, within [start, end]."""
    ordered = sorted(samples, key=lambda s: s.at)
    before = [s for s in ordered if s.at < start]
    baseline = (before[-1] if before else ordered[0]).value
    total = 0.0
    for i, s in enumerate(ordered):
        until = ordered[i + 1].at if i + 1 < len(ordered) else end
        lo, hi = max(s.at, start), min(until, end)
        if hi > lo:
            total += max(0.0, s.value - baseline) * (hi - lo).total_seconds() / 3600.0
    return total


def nodes_line(
    samples: Sequence[Sample] | None,
    start: datetime,
    end: datetime,
    price: CloudPrice,
    partial: str = "",
) -> BillLine:
    """The instance's nodes above its count before the build, priced per node-hour.
    `partial`: why the counts are only part of Monitoring's answer (the line is then
    estimated: a cluster's nodes may be missing from the sums)."""
    if not samples:
        return BillLine(
            "bigtable_nodes", 0.0, False, "node count not known: the instance assumed not scaled"
        )
    hours = node_hours_above(samples, start, end)
    basis = (
        f"Cloud Monitoring cluster/node_count: {hours:.2f} node-hours above the count before "
        f"the build at ${price.usd}/node-hour"
    )
    if partial:
        basis += f"; Monitoring answered in part ({partial})"
    return BillLine("bigtable_nodes", hours * price.usd, not partial, basis)


def controller_usd(usage: ControllerUsage, span_s: float, prices: dict[str, CloudPrice]) -> float:
    """The controller's use priced: invocations, instance time, Firestore, Pub/Sub, Logging,
    and the scheduler job for the build's span."""
    p = {k: v.usd for k, v in prices.items()}
    instance_s = usage.busy_s * (
        FUNCTION_VCPU * p["function_vcpu_second"] + FUNCTION_GIB * p["function_gib_second"]
    )
    return (
        usage.reconciles * p["function_invocation"]
        + instance_s
        + usage.reads * p["firestore_read"]
        + usage.writes * p["firestore_write"]
        + usage.messages * PUBSUB_MESSAGE_TIB * p["pubsub_tib"]
        + usage.log_bytes / GIB * p["logging_gib"]
        + p["scheduler_job_month"] * span_s / 3600.0 / MONTH_H
    )


def estimated_usage(
    span_s: float, tick_period_s: float, layers: int, commits: int
) -> ControllerUsage:
    """The controller's use of a run it did not count (stored before the counters): one
    reconcile a tick over the span, each reading the run and its layers; the run's version
    counts its commits, each writing the run and a layer."""
    reconciles = max(1, round(span_s / tick_period_s)) if span_s > 0 else 0
    return ControllerUsage(
        reconciles=reconciles,
        busy_s=reconciles * RECONCILE_S,
        reads=reconciles * (1 + layers) + commits,
        writes=2 * commits,
        messages=reconciles,
        log_bytes=reconciles * LOG_BYTES_PER_RECONCILE,
    )


def controller_line(
    counted: ControllerUsage,
    fallback: ControllerUsage,
    span_s: float,
    prices: dict[str, CloudPrice],
) -> BillLine:
    """From the controller's own counters when it kept them, else from `fallback`."""
    usage, measured = (counted, True) if counted.counted else (fallback, False)
    source = (
        "the controller's counters" if measured else "estimated from the run's span and version"
    )
    basis = (
        f"{source}: {usage.reconciles} reconciles, {usage.busy_s:.1f} s, {usage.reads} reads, "
        f"{usage.writes} writes, {usage.messages} messages, {usage.log_bytes / 1024:.1f} KiB logs"
    )
    return BillLine("controller", controller_usd(usage, span_s, prices), measured, basis)


def planned_bill(
    cost: RunCost, usage: ControllerUsage, span_s: float, prices: dict[str, CloudPrice]
) -> Bill:
    """A simulated build's bill (`pipeline simulate`): its pods and cluster fee, and the
    controller from the simulated reconciles, reads, writes and messages; the simulator
    models neither the table's bytes nor the instance's nodes. Every line is estimated."""
    lines = [
        replace(line, measured=False, basis="simulated: " + line.basis) for line in pod_lines(cost)
    ]
    lines.append(BillLine("table_storage", 0.0, False, "not simulated: $0"))
    lines.append(
        BillLine("bigtable_nodes", 0.0, False, "not simulated: the instance assumed not scaled")
    )
    ctl = controller_line(usage, usage, span_s, prices)
    lines.append(
        replace(
            ctl, measured=False, basis=ctl.basis.replace("the controller's counters", "simulated")
        )
    )
    return Bill(lines)


def projected_bill(
    now: Bill, spent_s: float, remaining_s: float, pods_usd: float, fee_usd: float
) -> Bill:
    """What the whole bill will be at the run's end (the forecast): the pods and the fee
    plus the forecast cost of what is left (`pods_usd`, `fee_usd`), every other line at its
    rate so far for the remaining time. Every line is estimated."""
    grow = (spent_s + remaining_s) / spent_s if spent_s > 0 else 1.0
    out = []
    for line in now.lines:
        how = "measured" if line.measured else "estimated"
        if line.key == "pods":
            usd = line.usd + pods_usd
        elif line.key == "cluster_fee":
            usd = line.usd + fee_usd
        else:
            usd = line.usd * grow
        out.append(BillLine(line.key, usd, False, f"forecast from ${line.usd:.4f} so far ({how})"))
    return Bill(out)
