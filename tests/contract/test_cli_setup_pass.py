"""A failed setup pass looked into with the commands that show a layer (inspect, describe,
pods, events) as `RUN STAGE 0`: the controller on the Firestore and Bigtable emulators runs
the demo's real setup (`python -m worker.setup`) on local Kubernetes on a dataset whose
watershed is empty (what `pipeline start -c examples/demo/pipeline.yml --no-preflight` does);
the pod fails, and the commands show its pod, the error it ended with, the traceback and the
fix, as they show a layer's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

from adapters.bigtable.graph_meta_store import BigtableGraphTables
from adapters.google.firestore_store import FirestoreRunStore
from scripts import cluster_access
from scripts.cli import main
from shared.config.config_files import load_config
from shared.control.controller import Controller, utcnow
from shared.reconcile.build_plan import new_run
from tests.builders.local_jobs import wait_for
from tests.builders.stored_runs import DEMO

RUN = "r1"
EMPTY = "dataset data_source.watershed is empty: no volume to ingest"


@pytest.fixture
def failed_setup(
    store: FirestoreRunStore, emulators: Any, kube_cluster: Any
) -> Iterator[dict[str, Any]]:
    """Run r1's ingest setup, failed on local Kubernetes as the controller saw it fail."""
    cfg = load_config(DEMO)  # its watershed is "" (`pipeline demo` fills it in)
    bigtable = cfg.bigtable.model_copy(update={"instance": f"i-{uuid.uuid4().hex[:8]}"})
    cfg = cfg.model_copy(update={"bigtable": bigtable})
    store.create_run(new_run(cfg, RUN, ["ingest"], "auto", utcnow()))
    controller = Controller(
        store, kube_cluster, lambda kind, body: None, graph_tables=BigtableGraphTables()
    )

    def failed() -> bool:
        controller.reconcile(RUN)
        return store.load_run(RUN).setups["ingest"].phase == "failed"

    wait_for(failed, timeout=120, what="the ingest setup to fail")
    job = store.load_run(RUN).setups["ingest"].job_name
    kube_cluster.created.append(job)
    yield {"kube": kube_cluster.kube, "job": job}


@pytest.fixture
def cli(store: FirestoreRunStore, failed_setup: dict[str, Any]) -> Any:
    kube = failed_setup["kube"]  # read as the operators do
    env = {
        "PIPELINE_PROJECT": store.db.project,
        "KUBECONFIG": str(kube.operator_kubeconfig),
        cluster_access.NAMESPACE_ENV: kube.namespace,
    }

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    return invoke


def _ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output


def test_inspect_shows_the_setups_pod_error_traceback_and_fix(cli, failed_setup):
    out = _ok(cli("inspect", RUN, "ingest", "0"))
    assert f"ingest setup of run {RUN}: failed" in out and failed_setup["job"] in out
    assert f"error: setup failed: {EMPTY} (exit 42)" in out
    assert "Traceback (most recent call last)" in out and "FatalChunkError" in out
    assert "setup_failed" in out  # its alert
    assert f"fix: fix the cause, then `pipeline submit {RUN} ingest 0`" in out
    # the same by name, and with its one index
    assert _ok(cli("inspect", RUN, "ingest", "setup")) == out
    assert f"error: setup failed: {EMPTY}" in _ok(cli("inspect", RUN, "ingest", "0", "0"))
    refused = cli("inspect", RUN, "ingest", "0", "3")
    assert refused.exit_code == 2 and "a setup pass has one pod, index 0" in refused.output


def test_describe_shows_the_setups_job_error_and_fix(cli, failed_setup):
    out = _ok(cli("describe", RUN, "ingest", "0"))
    assert f"ingest setup of run {RUN} (failed) · job {failed_setup['job']}" in out
    assert f"error: setup failed: {EMPTY} (exit 42)" in out
    assert f"fix: fix the cause, then `pipeline submit {RUN} ingest 0`" in out
    assert f"pipeline inspect {RUN} ingest 0" in out


def test_pods_and_events_show_the_setups_pod(cli, failed_setup):
    pods = _ok(cli("pods", RUN, "ingest", "0"))
    assert f"pods of job {failed_setup['job']}: 1" in pods and "Failed" in pods and "42" in pods
    events = _ok(cli("events", RUN, "ingest", "setup"))
    assert f"events of job {failed_setup['job']}" in events and "SuccessfulCreate" in events


def test_a_stage_without_a_setup_pass_names_the_stages_that_have_one(cli):
    result = cli("pods", RUN, "meshing", "0")
    assert result.exit_code == 2
    assert f"run {RUN} has no setup pass for stage 'meshing' (stages with one: ingest)" in (
        result.output
    )
