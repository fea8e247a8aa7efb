"""The ramp's Bigtable gate on the local stack's parts: the meter in front of the real
Bigtable emulator counts one request per gRPC call, and a controller (Firestore emulator)
reading the load derived from that rate holds a running layer's ramp when the load is above
`controller.bigtable_cpu_max`, and lets it grow when it is not; either way the commit carries
the controller's own counts (the bill's controller line). A partial answer's load is a lower
bound: it holds the ramp only when it alone is above the cap."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from adapters.local.bigtable_meter import BigtableMeter, LocalBigtableMonitor
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.money.controller_usage import ControllerUsage
from shared.ports.partial_answer import PartialAnswer
from shared.reconcile.build_plan import new_run
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import DEMO, NOW
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

READS = 30
WINDOW_S = 60.0  # wide: a slow machine between the reads and the reconcile changes nothing


@pytest.fixture
def meter(emulators, monkeypatch):
    meter = BigtableMeter(emulators.env["BIGTABLE_EMULATOR_HOST"]).start()
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", meter.address)
    yield meter
    meter.stop()


def _read_through(meter: BigtableMeter) -> int:
    """READS row reads through the meter; the requests it counted for them."""
    from google.cloud import bigtable

    client = bigtable.Client(project=BIGTABLE_PROJECT, admin=True)
    table = client.instance(BIGTABLE_INSTANCE).table("gate-test")
    if not table.exists():
        table.create()
    before = meter.total
    for _ in range(READS):
        table.read_row(b"row")
    counted = meter.total - before
    client.close()
    return counted


def _running_layer(store: FirestoreRunStore, cluster: RecordingCluster) -> None:
    cfg = load_config(DEMO)
    run = new_run(cfg, "gate", ["ingest"], "auto", NOW)
    run.setups.clear()
    ls = run.layers["ingest-L2"]
    ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", "gate-job", 64, 2
    ls.timing.submitted_at = ls.timing.ramp_started_at = ls.progress.at = NOW
    store.create_run(run)
    cluster.create_job(
        {"metadata": {"name": "gate-job"}, "spec": {"completions": 64, "parallelism": 2}}
    )


@pytest.mark.parametrize(("load", "want_held"), [(0.78, True), (0.3, False)])
def test_the_ramp_holds_while_the_emulator_is_busy(meter, firestore_project, load, want_held):
    assert _read_through(meter) == READS  # one request per call, reads and their streams
    # The local instance's capacity such that this traffic is `load` of it.
    monitor = LocalBigtableMonitor(meter, meter.rate(WINDOW_S) / load, window_s=WINDOW_S)
    store, cluster = FirestoreRunStore(firestore_project), RecordingCluster()
    _running_layer(store, cluster)
    later = NOW + timedelta(minutes=5)  # the demo's ramp would be far past 2 by now
    Controller(
        store, cluster, lambda k, b: None, clock=lambda: later, bigtable_monitor=monitor
    ).reconcile("gate")
    run = store.load_run("gate")
    parallelism = run.layers["ingest-L2"].job.parallelism
    # The controller's own use rode along with the commit (the bill's controller line).
    usage = ControllerUsage.from_doc(run.controller_usage)
    assert (usage.reconciles, usage.reads) == (1, 1 + len(run.layers) + 1)  # + version check
    assert usage.writes >= 2 and usage.messages >= 1 and usage.busy_s > 0
    if want_held:
        assert parallelism == 2 and cluster.patches == []
        assert "ramp held" in run.ramp_hold and "controller.bigtable_cpu_max" in run.ramp_hold
    else:
        assert parallelism > 2 and run.ramp_hold == ""


def test_a_step_down_waits_for_the_meters_window(meter, firestore_project):
    """Stepped down 5 s ago (past the demo's 3 s ramp period) on a load that is still high:
    the meter's window (60 s here) still counts the pods taken away, so the layer holds
    rather than stepping down again on a stale rate."""
    _read_through(meter)
    monitor = LocalBigtableMonitor(meter, meter.rate(WINDOW_S) / 0.95, window_s=WINDOW_S)
    store, cluster = FirestoreRunStore(firestore_project), RecordingCluster()
    _running_layer(store, cluster)
    later = NOW + timedelta(minutes=5)

    def lowered_just_now(run):
        run.layers["ingest-L2"].timing.ramp_lowered_at = later - timedelta(seconds=5)

    store.update_run("gate", lowered_just_now)
    Controller(
        store, cluster, lambda k, b: None, clock=lambda: later, bigtable_monitor=monitor
    ).reconcile("gate")
    run = store.load_run("gate")
    assert "lowered one step" in run.ramp_hold
    assert run.layers["ingest-L2"].job.parallelism == 2 and cluster.patches == []


class PartialMonitor:
    """Cloud Monitoring answering in part (executionErrors): the load it held, as
    adapters.google.monitoring raises it."""

    load_lag_s = 0.0

    def __init__(self, held: float | None) -> None:
        self.held = held

    def cpu_load(self, project: str, instance: str) -> float | None:
        raise PartialAnswer("executionErrors: a cluster could not be read", self.held)


@pytest.mark.parametrize(("held", "want_held"), [(0.78, True), (0.3, False), (None, False)])
def test_a_partial_load_is_a_lower_bound(firestore_project, held, want_held):
    """The true load is at least what a partial answer held: above the cap it holds the ramp;
    below, or with no point at all, the ramp runs as on an unknown load."""
    store, cluster = FirestoreRunStore(firestore_project), RecordingCluster()
    _running_layer(store, cluster)
    later = NOW + timedelta(minutes=5)
    monitor = PartialMonitor(held)
    Controller(
        store, cluster, lambda k, b: None, clock=lambda: later, bigtable_monitor=monitor
    ).reconcile("gate")
    run = store.load_run("gate")
    assert ("ramp held" in run.ramp_hold) is want_held
    assert (run.layers["ingest-L2"].job.parallelism == 2) is want_held
