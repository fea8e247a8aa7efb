"""The whole bill of a run (shared.money.bill) with what Cloud Monitoring, or the local stack's
meter, knows of its Bigtable instance. The I/O edge of the bill: a monitor that cannot be
reached leaves its lines estimated, never fails the command; one that answers in part
(PartialAnswer) gives its figures, and the lines say they are partial and estimated."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from scripts.money_format import usd
from shared.config.config import PipelineConfig
from shared.forecast.forecast import run_forecast
from shared.model.phase import RunStatus
from shared.model.state import RunState
from shared.money.bill import (
    Bill,
    controller_line,
    estimated_usage,
    nodes_line,
    pod_lines,
    projected_bill,
    storage_line,
)
from shared.money.controller_usage import ControllerUsage
from shared.money.costs import estimate
from shared.money.pricing import load_cloud_prices, load_rates
from shared.ports.bigtable_monitor import BigtableMonitor, Sample
from shared.ports.partial_answer import PartialAnswer


def default_monitor() -> BigtableMonitor | None:
    """Cloud Monitoring, unless an emulator stands in for Bigtable (nothing to read there
    from another process: the demo passes the local stack's meter)."""
    if os.environ.get("BIGTABLE_EMULATOR_HOST"):
        return None
    from adapters.wiring import cli_services

    return cli_services().bigtable_monitor()


def _read(read: Any) -> tuple[list[Sample] | None, str, str]:
    """A monitor's series, why it is not known ("" when read) and why it is partial."""
    try:
        return read(), "", ""
    except PartialAnswer as e:
        return e.value, "", e.reason
    except Exception as e:  # noqa: BLE001 - an unreachable Monitoring leaves the line estimated
        return None, f"{type(e).__name__}: {str(e)[:120]}", ""


def run_bill(
    cfg: PipelineConfig, run: RunState, now: datetime, monitor: BigtableMonitor | None
) -> Bill:
    """Every line of a run's bill, priced now."""
    prices = load_cloud_prices()
    lines = pod_lines(estimate(cfg, run, load_rates(), now))
    start = run.created_at or now
    end = run.finished_at or now
    span_s = max(0.0, (end - start).total_seconds())
    where = (cfg.bigtable.project, cfg.bigtable.instance)
    table, nodes, why, table_partial, nodes_partial = None, None, "no monitor", "", ""
    if monitor is not None:
        read = _read(lambda: monitor.table_bytes(*where, cfg.graph_id, start, end))
        table, why, table_partial = read
        nodes, _, nodes_partial = _read(lambda: monitor.node_counts(*where, start, end))
    source = getattr(monitor, "storage_source", "Cloud Monitoring")
    if table is None and why:
        source += f" ({why})"
    exact = bool(getattr(monitor, "storage_exact", True))
    storage_price = prices["bigtable_ssd_gib_month"]
    lines.append(storage_line(table, start, end, storage_price, exact, source, table_partial))
    lines.append(nodes_line(nodes, start, end, prices["bigtable_node_hour"], nodes_partial))
    counted = ControllerUsage.from_doc(run.controller_usage)
    fallback = estimated_usage(span_s, cfg.controller.tick_period_s, len(run.layers), run.version)
    lines.append(controller_line(counted, fallback, span_s, prices))
    return Bill(lines)


def run_projected_bill(
    cfg: PipelineConfig, run: RunState, now: datetime, bill: Bill
) -> Bill | None:
    """The whole bill at the run's end by the forecast (shared.forecast.forecast); None once the run
    ended or when the forecast cannot price it."""
    if run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED) or run.created_at is None:
        return None
    try:
        fc = run_forecast(cfg, run, now)
    except ValueError:  # a region the rate table lacks
        return None
    pods = sum(lf.projected_usd for lf in fc.layers)
    spent = max(0.0, (now - run.created_at).total_seconds())
    return projected_bill(bill, spent, fc.remaining_s, pods, fc.projected_usd - pods)


def bill_facts(bill: Bill) -> dict[str, str]:
    """The bill as the report's header facts, one per line and the total."""
    out = {"whole bill": f"${usd(bill.total_usd)}"}
    for line in bill.lines:
        how = "measured" if line.measured else "estimated"
        out[f"bill: {line.key}"] = f"${usd(line.usd)} ({how})"
    return out
