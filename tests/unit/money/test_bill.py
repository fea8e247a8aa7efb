"""The whole bill's lines, table-driven: storage from a bytes series, nodes above the count
before the build, the controller from its counters (or estimated without them), and each
line's measured flag; the packaged prices carry their source and date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.money.bill import (
    GIB,
    Bill,
    controller_line,
    controller_usd,
    estimated_usage,
    node_hours_above,
    nodes_line,
    pod_lines,
    storage_line,
)
from shared.money.controller_usage import ControllerUsage, reconcile_usage
from shared.money.costs import LayerCost, RunCost
from shared.money.pricing import load_cloud_prices, parse_cloud_prices
from shared.ports.bigtable_monitor import Sample
from shared.ports.partial_answer import PartialAnswer

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)
PRICES = load_cloud_prices()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_every_price_has_its_source_and_date():
    for item in ("bigtable_node_hour", "bigtable_ssd_gib_month", "logging_gib", "firestore_read"):
        price = PRICES[item]
        assert price.usd > 0 and price.source.startswith("https://") and price.date
    with pytest.raises(ValueError, match="line 2"):
        parse_cloud_prices("item,unit,usd,source,date\nx,GiB,-1,s,d\n")


@pytest.mark.parametrize(
    ("samples", "hours", "want_gib"),
    [
        ([Sample(at(0), 10 * GIB), Sample(at(60), 30 * GIB)], 1.0, 20.0),  # the mean
        ([Sample(at(-60), 500 * GIB), Sample(at(30), 10 * GIB)], 1.0, 10.0),  # before: out
        ([Sample(at(0), 730 * GIB)], 730.0, 730.0),  # a month of 730 GiB
    ],
)
def test_storage_is_the_mean_bytes_over_the_span_priced_per_gib_month(samples, hours, want_gib):
    line = storage_line(samples, T0, T0 + timedelta(hours=hours), PRICES["bigtable_ssd_gib_month"])
    assert line.measured and line.key == "table_storage"
    assert line.usd == pytest.approx(want_gib * hours / 730 * 0.17)


@pytest.mark.parametrize("samples", [None, [], [Sample(at(-10), GIB)]])
def test_storage_without_a_series_in_the_span_is_estimated_at_zero(samples):
    line = storage_line(samples, T0, at(60), PRICES["bigtable_ssd_gib_month"])
    assert (line.usd, line.measured) == (0.0, False)


def test_storage_from_an_approximate_series_is_estimated():
    line = storage_line([Sample(at(60), GIB)], T0, at(60), PRICES["bigtable_ssd_gib_month"], False)
    assert not line.measured and line.usd > 0


@pytest.mark.parametrize(
    ("counts", "want"),
    [
        ([(-5, 3), (0, 3), (60, 3)], 0.0),  # did not scale
        ([(-5, 3), (0, 5), (60, 3)], 2.0),  # 2 more nodes for the first hour
        ([(-5, 3), (30, 6), (90, 3)], 1.5),  # 3 more for the last half hour (end at 60)
        ([(0, 4), (60, 4)], 0.0),  # no point before: the first is the baseline
        ([(-5, 5), (0, 3)], 0.0),  # scaled down: nothing attributable
    ],
)
def test_node_hours_above_the_count_before_the_build(counts, want):
    samples = [Sample(at(m), float(n)) for m, n in counts]
    assert node_hours_above(samples, T0, at(60)) == pytest.approx(want)


def test_nodes_line_measured_from_a_series_estimated_without():
    samples = [Sample(at(-5), 3.0), Sample(at(0), 5.0)]
    line = nodes_line(samples, T0, at(60), PRICES["bigtable_node_hour"])
    assert line.measured and line.usd == pytest.approx(2 * 0.65)
    unknown = nodes_line(None, T0, at(60), PRICES["bigtable_node_hour"])
    assert (unknown.usd, unknown.measured) == (0.0, False)


def test_controller_usage_counts_a_reconcile_and_adds_up():
    quiet = reconcile_usage(8, False, 0, 0, 0, 0.2, 100)
    busy = reconcile_usage(8, True, 2, 1500, 1, 0.3, 200)
    assert (quiet.reads, quiet.writes, quiet.messages) == (9, 0, 1)
    assert (busy.reads, busy.writes, busy.messages) == (10, 1 + 2 + 2 + 1, 2)
    total = quiet + busy
    assert (total.reconciles, total.busy_s, total.log_bytes) == (2, pytest.approx(0.5), 300)
    assert ControllerUsage.from_doc(total.to_doc()) == total
    assert ControllerUsage.from_doc(None) == ControllerUsage()  # a run from before


def test_controller_usd_prices_each_counter():
    one = {
        "reconciles": 1_000_000,  # $0.40
        "busy_s": 1000.0,  # 1000 x (0.000024 + 2 x 0.0000025) = $0.029
        "reads": 100_000,  # $0.06
        "writes": 100_000,  # $0.18
        "messages": 2**30,  # 1 TiB at 1 KiB a message: $40
        "log_bytes": 2**30,  # $0.50
    }
    usd = controller_usd(ControllerUsage(**one), 0.0, PRICES)
    assert usd == pytest.approx(0.40 + 0.029 + 0.06 + 0.18 + 40 + 0.50)


def test_controller_line_measured_from_counters_else_estimated():
    counted = ControllerUsage(reconciles=10, busy_s=2.0, reads=50, writes=20, messages=12)
    fallback = estimated_usage(3600.0, 60.0, 8, 30)
    assert fallback.reconciles == 60 and fallback.writes == 60
    line = controller_line(counted, fallback, 3600.0, PRICES)
    assert line.measured and "10 reconciles" in line.basis
    line = controller_line(ControllerUsage(), fallback, 3600.0, PRICES)
    assert not line.measured and "60 reconciles" in line.basis


def test_bill_as_dict_has_every_line_and_the_total():
    cost = RunCost([LayerCost("ingest-L2", 0.25, 0), LayerCost("ingest-L3", 0.5, 2)], 0.1)
    lines = pod_lines(cost) + [
        nodes_line(None, T0, at(60), PRICES["bigtable_node_hour"]),
        storage_line([Sample(at(1), GIB)], T0, at(60), PRICES["bigtable_ssd_gib_month"]),
    ]
    doc = Bill(lines).as_dict()
    assert set(doc) == {"pods", "cluster_fee", "bigtable_nodes", "table_storage", "total_usd"}
    assert doc["pods"]["usd"] == pytest.approx(0.75) and doc["pods"]["measured"]
    assert "2 pods unseen" in doc["pods"]["basis"]
    assert doc["bigtable_nodes"]["measured"] is False
    assert doc["total_usd"] == pytest.approx(0.85 + doc["table_storage"]["usd"])


class _Monitor:
    """A `BigtableMonitor` answering from given series (the Monitoring adapter itself is
    tested against hand-written HTTP responses in test_monitoring_fixtures.py); `partial`:
    each answer is partial for that reason."""

    storage_exact = True
    storage_source = "Cloud Monitoring table/bytes_used"

    load_lag_s = 0.0

    def __init__(self, table=None, nodes=None, error: Exception | None = None, partial=""):
        self.table, self.nodes, self.error = table or [], nodes or [], error
        self.partial = partial

    def cpu_load(self, project, instance):
        return None

    def table_bytes(self, project, instance, table, start, end):
        if self.error:
            raise self.error
        if self.partial:
            raise PartialAnswer(self.partial, self.table)
        return self.table

    def node_counts(self, project, instance, start, end):
        if self.error:
            raise self.error
        if self.partial:
            raise PartialAnswer(self.partial, self.nodes)
        return self.nodes


def _finished_run():
    from scripts.layer_target import run_config
    from tests.builders.report_run import report_run

    run, _, now = report_run()
    run.finished_at = now
    return run_config(run), run, now


def test_run_bill_measures_what_monitoring_has_and_estimates_what_it_cannot_read():
    from scripts.bill_read import run_bill

    cfg, run, now = _finished_run()
    start = run.created_at
    series = [Sample(start + timedelta(seconds=30), 50 * GIB)]
    nodes = [Sample(start - timedelta(minutes=5), 3.0), Sample(start, 6.0)]
    bill = run_bill(cfg, run, now, _Monitor(series, nodes)).as_dict()
    assert bill["table_storage"]["measured"] and bill["table_storage"]["usd"] > 0
    assert bill["bigtable_nodes"]["measured"] and bill["bigtable_nodes"]["usd"] > 0
    assert bill["controller"]["measured"] is False  # a run stored before the counters
    down = run_bill(cfg, run, now, _Monitor(error=ConnectionError("no route"))).as_dict()
    assert down["table_storage"]["measured"] is False
    assert "ConnectionError: no route" in down["table_storage"]["basis"]
    assert down["total_usd"] == pytest.approx(
        sum(v["usd"] for k, v in down.items() if k != "total_usd")
    )


def test_a_partial_monitoring_answer_is_priced_but_not_measured():
    """Monitoring's `executionErrors`/`unreachable`: the figures it held are priced (a lower
    bound) and the lines say so, estimated rather than measured."""
    from scripts.bill_read import run_bill

    cfg, run, now = _finished_run()
    start = run.created_at
    series = [Sample(start + timedelta(seconds=30), 50 * GIB)]
    nodes = [Sample(start - timedelta(minutes=5), 3.0), Sample(start, 6.0)]
    full = run_bill(cfg, run, now, _Monitor(series, nodes)).as_dict()
    part = run_bill(cfg, run, now, _Monitor(series, nodes, partial="unreachable: us-east1"))
    bill = part.as_dict()
    for line in ("table_storage", "bigtable_nodes"):
        assert bill[line]["measured"] is False
        assert bill[line]["usd"] == pytest.approx(full[line]["usd"])
        assert "answered in part (unreachable: us-east1)" in bill[line]["basis"]


def test_a_running_run_has_a_projected_bill_above_what_is_spent():
    from scripts.bill_read import run_bill, run_projected_bill

    cfg, run, now = _finished_run()
    run.finished_at, run.status = None, "running"
    run.controller_usage = ControllerUsage(reconciles=20, busy_s=4.0, reads=100).to_doc()
    bill = run_bill(cfg, run, now, None)
    projected = run_projected_bill(cfg, run, now, bill)
    assert projected is not None
    assert projected.total_usd >= bill.total_usd
    assert all(not line.measured for line in projected.lines)
