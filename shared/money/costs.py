"""A run's estimated Autopilot spend, priced at read time from the recorded usage. Pure.

Each layer stores vCPU-seconds and GiB-seconds of its pod attempts
(shared.reconcile.pod_accounting); a setup pass is one pod priced over its Jobs' spans;
the price comes from the rate table for the run's region, the stage's compute class and
Spot. Completions whose pods were never seen (garbage-collected before a reconcile listed
them) are backfilled at the mean observed runtime and reported as such. The cluster fee is
charged once over the union of the run's Job spans. The rate table is an argument
(`shared.money.pricing.load_rates` reads the packaged one), so everything here is arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from shared.jobs.setup_job import setup_requests
from shared.model import intervals
from shared.model.phase import Phase
from shared.model.state import LayerState, RunState, SetupState
from shared.money.pricing import Rate, RateRow, cluster_fee, pod_cost, rate_for

if TYPE_CHECKING:
    from shared.config.config import PipelineConfig


@dataclass(frozen=True)
class Billing:
    """How a run's stages are billed: the region, and each stage's compute class and Spot."""

    region: str
    compute_class: dict[str, str] = field(default_factory=dict)  # stage -> class ("" = GP)
    spot: dict[str, bool] = field(default_factory=dict)  # stage -> Spot (default True)


def billing_for(cfg: PipelineConfig, stages: Iterable[str]) -> Billing:
    """The billing of `stages` under a config (per-stage job overrides applied)."""
    jobs = {s: cfg.job.for_stage(s) for s in stages}
    return Billing(
        cfg.region,
        {s: j.compute_class for s, j in jobs.items()},
        {s: j.spot for s, j in jobs.items()},
    )


@dataclass(frozen=True)
class LayerCost:
    key: str
    usd: float
    backfilled_pods: int  # completions priced at the mean runtime, not observed


@dataclass(frozen=True)
class RunCost:
    layers: list[LayerCost] = field(default_factory=list)
    cluster_fee_usd: float = 0.0

    @property
    def usd(self) -> float:
        return sum(lc.usd for lc in self.layers) + self.cluster_fee_usd


def layer_cost(ls: LayerState, rate: Rate) -> LayerCost:
    """Recorded usage (finished + running so far) priced, plus the backfill."""
    cpu_s = ls.pods.cpu_seconds + ls.pods.running_cpu_seconds
    mem_s = ls.pods.memory_gib_seconds + ls.pods.running_memory_gib_seconds
    usd = pod_cost(rate, cpu_s, mem_s, 1.0)
    missing = 0
    done = (
        ls.job.completions
        if ls.phase == Phase.SUCCEEDED
        else intervals.count(ls.progress.completed_indexes)
    )
    if ls.phase in (Phase.SUCCEEDED, Phase.FAILED) and ls.pods.succeeded < done:
        missing = done - ls.pods.succeeded
        mean = ls.pods.succeeded_runtime_s / ls.pods.succeeded if ls.pods.succeeded else 0.0
        usd += pod_cost(rate, ls.pods.cpu_request, ls.pods.memory_request_gib, mean * missing)
    return LayerCost(ls.key, usd, missing)


def setup_cost(setup: SetupState, rate: Rate, compute_class: str, now: datetime) -> LayerCost:
    """A stage's setup pass (key `<stage>-setup`): one pod at the setup's requests for as long
    as its Jobs existed, earlier attempts included. The Job's span covers the pod's start-up
    too: an upper bound, so the budget guard never under-counts."""
    req = setup_requests(compute_class)
    return LayerCost(
        f"{setup.stage}-setup", pod_cost(rate, req.cpu, req.memory_gib, setup.span_s(now)), 0
    )


def run_cost(run: RunState, rates: tuple[RateRow, ...], billing: Billing, now: datetime) -> RunCost:
    """Price every layer and setup pass of a run and the cluster fee over its Job spans."""
    layers = []
    spans = []

    def rate_of(stage: str) -> Rate:
        return rate_for(
            rates,
            billing.region,
            billing.compute_class.get(stage, ""),
            billing.spot.get(stage, True),
        )

    for setup in run.setups.values():
        if setup.started_at is None and not setup.earlier_s:
            continue
        cls = billing.compute_class.get(setup.stage, "")
        layers.append(setup_cost(setup, rate_of(setup.stage), cls, now))
        if setup.started_at is not None:
            spans.append((setup.started_at, setup.finished_at or now))
    for ls in run.ordered_layers():
        if ls.timing.submitted_at is None:
            if (
                ls.pods.cpu_seconds or ls.pods.memory_gib_seconds
            ):  # its canary's pods, billed already
                layers.append(layer_cost(ls, rate_of(ls.stage)))
            continue
        layers.append(layer_cost(ls, rate_of(ls.stage)))
        spans.append((ls.timing.submitted_at, ls.timing.finished_at or now))
    fee_rate = rate_for(rates, billing.region, "")
    return RunCost(layers, cluster_fee(fee_rate, spans) if spans else 0.0)


def estimate(
    cfg: PipelineConfig, run: RunState, rates: tuple[RateRow, ...], now: datetime
) -> RunCost:
    """A run's cost under its config, broken down by layer, plus the cluster fee."""
    return run_cost(run, rates, billing_for(cfg, run.stages), now)


def spend(cfg: PipelineConfig, run: RunState, rates: tuple[RateRow, ...], now: datetime) -> float:
    """A run's estimated Autopilot spend so far, in dollars."""
    return estimate(cfg, run, rates, now).usd
