"""The Cloud Functions through functions-framework, with real Eventarc Pub/Sub envelopes,
against the Firestore and Pub/Sub emulators (the cluster is the recording fake)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters import wiring
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import TOPICS, PubSubBus
from adapters.local.log_export import make_log_entry
from tests.builders.cloud_events import client, envelope, kick, start_run
from tests.builders.fakes import RecordingCluster

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"


@pytest.fixture
def env(firestore_project, monkeypatch):
    # One project id for both services, as in the cloud.
    monkeypatch.setenv("PIPELINE_PROJECT", firestore_project)
    bus = PubSubBus(firestore_project)
    for topic in TOPICS:
        bus.ensure_topic(topic)
    alerts_sub = bus.ensure_subscription("alerts", "alerts-test")
    cluster = RecordingCluster()
    with wiring.in_process_functions(cluster, done_markers=None):  # no worker runs: no done markers
        store = FirestoreRunStore(firestore_project)
        yield store, cluster, bus, alerts_sub
    bus.close()


def test_kick_creates_the_first_layer_job(env):
    store, cluster, _, _ = env
    run_id = start_run(store)
    headers, body = envelope(json.dumps({"run_id": run_id, "action": "start"}).encode(), "kick")
    assert client("on_kick").post("/", headers=headers, data=body).status_code == 200
    assert cluster.creates == [store.load_run(run_id).layers["ingest-L2"].job.name]
    manifest = cluster.manifests[cluster.creates[0]]
    assert manifest["spec"]["completionMode"] == "Indexed"


@pytest.mark.parametrize(
    ("target", "data"),
    [
        ("on_kick", b"not json"),
        ("on_kick", json.dumps({"action": "start"}).encode()),  # no run_id
        ("on_kick", json.dumps({"run_id": "no-such-run"}).encode()),
        ("on_job_event", b"{}"),
        ("on_job_event", json.dumps({"jsonPayload": {"involvedObject": {"kind": "Pod"}}}).encode()),
    ],
)
def test_permanent_errors_are_acknowledged(env, target, data):
    headers, body = envelope(data, "kick")
    assert client(target).post("/", headers=headers, data=body).status_code == 200


def test_job_event_reconciles_owner_and_duplicates_are_dropped(env):
    """The event reconciles the Job's run; its redelivery is dropped on its insertId. The
    event is stamped ahead of the function's clock (skew), so no reconcile covers it
    (shared.ports.coalesce) and only the dedupe can drop the redelivery; and by then layer 3 has
    completed too, so a redelivery that got through would start layer 4."""
    store, cluster, _, _ = env
    run_id = start_run(store)
    kick(run_id)
    name = store.load_run(run_id).layers["ingest-L2"].job.name
    cluster.finish(
        name,
        condition="Complete",
        completion_time=datetime.now(UTC),
        completed_indexes=f"0-{load_plan_completions(store, run_id) - 1}",
    )
    ahead = datetime.now(UTC) + timedelta(seconds=30)
    entry = completed_event(name, "Job completed", now=ahead)
    headers, body = envelope(json.dumps(entry).encode(), "job-events")
    app = client("on_job_event")
    assert app.post("/", headers=headers, data=body).status_code == 200
    state = store.load_run(run_id)
    l3 = state.layers["ingest-L3"]
    assert l3.phase == "running" and state.layers["ingest-L4"].phase == "waiting"
    cluster.finish(
        l3.job.name,
        condition="Complete",
        completion_time=datetime.now(UTC),
        completed_indexes=f"0-{l3.job.completions - 1}",
    )
    assert app.post("/", headers=headers, data=body).status_code == 200  # redelivery
    after = store.load_run(run_id)  # a fresh read, not the snapshot above
    assert after.version == state.version  # deduped on insertId
    assert after.layers["ingest-L4"].phase == "waiting"


def completed_event(job_name: str, message: str, **extra: Any) -> dict[str, Any]:
    """The Job's `Completed` event as the GKE event exporter logs it."""
    return make_log_entry(
        project="p",
        cluster="c",
        location="l",
        namespace="default",
        job_name=job_name,
        job_uid="u",
        reason="Completed",
        message=message,
        **extra,
    )


def load_plan_completions(store, run_id) -> int:
    return store.load_run(run_id).layers["ingest-L2"].job.completions


def test_stale_job_event_is_dropped(env):
    store, cluster, _, _ = env
    run_id = start_run(store)
    kick(run_id)
    name = store.load_run(run_id).layers["ingest-L2"].job.name
    old = datetime.now(UTC) - timedelta(hours=2)
    entry = completed_event(name, "", now=old)
    version = store.load_run(run_id).version
    headers, body = envelope(json.dumps(entry).encode(), "job-events")
    assert client("on_job_event").post("/", headers=headers, data=body).status_code == 200
    assert store.load_run(run_id).version == version


def test_tick_reconciles_active_runs_and_publishes_alerts(env):
    store, _, bus, alerts_sub = env
    run_id = start_run(store, advance="approve")
    headers, body = envelope(json.dumps({"at": "now"}).encode(), "ticks")
    assert client("on_tick").post("/", headers=headers, data=body).status_code == 200
    response = bus.subscriber.pull(subscription=alerts_sub, max_messages=10, timeout=10)
    kinds = [m.message.attributes["kind"] for m in response.received_messages]
    assert kinds == ["approval_needed"]
    payload = json.loads(response.received_messages[0].message.data)
    assert payload["run_id"] == run_id and payload["layer"] == 2
    # The outbox id, for subscribers to dedupe on (delivery is at least once).
    assert response.received_messages[0].message.attributes["alert_id"] == payload["alert_id"]
    assert store.unsent_alerts(run_id) == []


def test_job_event_whose_reconcile_fails_is_redelivered_not_deduped(env):
    """A transient failure answers 500 so Pub/Sub redelivers, and the redelivery is not
    swallowed by the dedupe of the first attempt."""

    store, cluster, _, _ = env
    run_id = start_run(store)
    kick(run_id)
    name = store.load_run(run_id).layers["ingest-L2"].job.name
    headers, body = envelope(json.dumps(completed_event(name, "")).encode(), "job-events")
    app = client("on_job_event")
    cluster.unreachable.add("get_job")
    assert app.post("/", headers=headers, data=body).status_code == 500
    cluster.unreachable.discard("get_job")
    version = store.load_run(run_id).version
    last = load_plan_completions(store, run_id) - 1
    cluster.finish(
        name, condition="Complete", completion_time=datetime.now(UTC), completed_indexes=f"0-{last}"
    )
    assert app.post("/", headers=headers, data=body).status_code == 200
    assert store.load_run(run_id).version > version
