"""The stored layer document stays flat while `LayerState` groups its fields into records
(`shared.model.state`): a document written with the flat keys reads back into the records
and writes back as the same dict, key for key, and an older document lacking later keys loads
with their defaults."""

from __future__ import annotations

from datetime import UTC, datetime
from operator import attrgetter

import pytest

from shared.model.state import LayerState, RunState, build_layers

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)

# A layer document as the controller stored it before the records existed: every key, in
# the stored order, with a value that differs from its default (so a key read into the wrong
# field, or dropped, changes the round trip).
STORED = {
    "stage": "ingest",
    "layer": 3,
    "phase": "failed",
    "approved": True,
    "approved_by": "ana",
    "approved_at": T0,
    "attempt": 2,
    "job_name": "job-ingest-3-2",
    "completions": 64,
    "parallelism": 8,
    "scale_override": 4,
    "eligible_at": T0,
    "ramp_started_at": T0,
    "submitted_at": T0,
    "finished_at": T1,
    "completed_indexes": "0-60",
    "failed_indexes": "61",
    "active": 3,
    "alerted_indexes": "61",
    "approval_alerted": True,
    "progress_count": 61,
    "progress_at": T1,
    "stall_alerted": True,
    "failure_reason": "BackoffLimitExceeded",
    "delete_requested": True,
    "retire_job": "job-ingest-3-1",
    "retire_delete": True,
    "cpu_request": 0.5,
    "memory_request_gib": 2.0,
    "cpu_seconds": 100.5,
    "memory_gib_seconds": 400.25,
    "running_cpu_seconds": 7.0,
    "running_memory_gib_seconds": 28.0,
    "pods_succeeded": 61,
    "pods_failed": 5,
    "pods_preempted": 2,
    "succeeded_runtime_s": 300.0,
    "open_pods": ["u1", "u2"],
    "pods_watermark": T0,
    "pods_at_watermark": ["u0"],
    "pods_listed_at": T1,
    "oom_killed": 1,
    "node_oom_killed": 1,
    "oom_alerted": True,
    "memory_factor": 1.5,
    "evictions": "3:2",
    "eviction_alerted_indexes": "3",
    "done_before": True,
    "root_check_failed": True,
    "held_by_vcpu_cap": True,
    "pods_hung": 1,
    "hung_pod_uids": ["u9"],
    "chunk_s_samples": [1.5, 2.5],
    "chunks_marked": 60,
    "ramp_lowered_at": T1,
    "used_cpu": [0.4],
    "used_memory_gib": [1.2],
    "canary_phase": "done",
    "canary_job": "job-ingest-3-0-canary",
    "canary": {"sized": {"cpu": 0.5, "memory_gib": 2.0}},
    "resize_cpu": 1.0,
    "resize_memory_gib": 4.0,
    "resize_asked": ["p1"],
    "process_start_s": 1.25,
}


def test_a_stored_document_writes_back_as_the_same_flat_dict_in_the_same_key_order() -> None:
    doc = LayerState.from_doc(STORED).to_doc()
    assert doc == STORED
    assert list(doc) == list(STORED)


def test_a_fresh_layer_stores_exactly_the_flat_keys() -> None:
    assert list(LayerState("ingest", 2).to_doc()) == list(STORED)


# Where each stored key lives in the records (the whole table: a key read into the wrong
# field would otherwise round-trip unnoticed).
WHERE = {
    "stage": "stage",
    "layer": "layer",
    "phase": "phase",
    "approved": "approval.granted",
    "approved_by": "approval.by",
    "approved_at": "approval.at",
    "attempt": "job.attempt",
    "job_name": "job.name",
    "completions": "job.completions",
    "parallelism": "job.parallelism",
    "scale_override": "job.scale_override",
    "eligible_at": "timing.eligible_at",
    "ramp_started_at": "timing.ramp_started_at",
    "submitted_at": "timing.submitted_at",
    "finished_at": "timing.finished_at",
    "completed_indexes": "progress.completed_indexes",
    "failed_indexes": "progress.failed_indexes",
    "active": "progress.active",
    "alerted_indexes": "progress.alerted_indexes",
    "approval_alerted": "approval.alerted",
    "progress_count": "progress.count",
    "progress_at": "progress.at",
    "stall_alerted": "progress.stall_alerted",
    "failure_reason": "failure_reason",
    "delete_requested": "job.delete_requested",
    "retire_job": "job.retire_job",
    "retire_delete": "job.retire_delete",
    "cpu_request": "pods.cpu_request",
    "memory_request_gib": "pods.memory_request_gib",
    "cpu_seconds": "pods.cpu_seconds",
    "memory_gib_seconds": "pods.memory_gib_seconds",
    "running_cpu_seconds": "pods.running_cpu_seconds",
    "running_memory_gib_seconds": "pods.running_memory_gib_seconds",
    "pods_succeeded": "pods.succeeded",
    "pods_failed": "pods.failed",
    "pods_preempted": "pods.preempted",
    "succeeded_runtime_s": "pods.succeeded_runtime_s",
    "open_pods": "pods.open",
    "pods_watermark": "pods.watermark",
    "pods_at_watermark": "pods.at_watermark",
    "pods_listed_at": "pods.listed_at",
    "oom_killed": "faults.oom_killed",
    "node_oom_killed": "faults.node_oom_killed",
    "oom_alerted": "faults.oom_alerted",
    "memory_factor": "faults.memory_factor",
    "evictions": "faults.evictions",
    "eviction_alerted_indexes": "faults.eviction_alerted_indexes",
    "done_before": "done_before",
    "root_check_failed": "root_check_failed",
    "held_by_vcpu_cap": "timing.held_by_vcpu_cap",
    "pods_hung": "faults.hung",
    "hung_pod_uids": "faults.hung_pod_uids",
    "chunk_s_samples": "pods.chunk_s_samples",
    "chunks_marked": "progress.chunks_marked",
    "ramp_lowered_at": "timing.ramp_lowered_at",
    "used_cpu": "pods.used_cpu",
    "used_memory_gib": "pods.used_memory_gib",
    "canary_phase": "canary.phase",
    "canary_job": "canary.job",
    "canary": "canary.record",
    "resize_cpu": "job.resize_cpu",
    "resize_memory_gib": "job.resize_memory_gib",
    "resize_asked": "job.resize_asked",
    "process_start_s": "timing.process_start_s",
}


def test_the_table_covers_every_stored_key() -> None:
    assert list(WHERE) == list(STORED)


# The keys whose value is a phase (read as shared.model.phase.Phase): a marker must be a phase,
# one that differs from both phases of STORED.
PHASE_MARKERS = {"phase": "running", "canary_phase": "running"}


@pytest.mark.parametrize(("key", "path"), WHERE.items(), ids=WHERE.keys())
def test_each_stored_key_is_read_into_its_record_field_and_written_back(key, path) -> None:
    marker = PHASE_MARKERS.get(key, f"<{key}>")  # unlike every other value of its kind
    ls = LayerState.from_doc({**STORED, key: marker})
    assert attrgetter(path)(ls) == marker
    assert ls.to_doc() == {**STORED, key: marker}


def test_an_older_document_without_later_keys_loads_with_their_defaults() -> None:
    old = {"stage": "ingest", "layer": 2, "phase": "succeeded", "approved": True, "job_name": "j"}
    ls = LayerState.from_doc({**old, "retired_key": 1})
    assert (ls.approval.granted, ls.job.name, ls.faults.memory_factor) == (True, "j", 1.0)
    assert ls.to_doc() == {**LayerState("ingest", 2).to_doc(), **old}


def test_records_are_not_shared_between_layers() -> None:
    a, b = LayerState("ingest", 2), LayerState("ingest", 3)
    a.pods.open.append("u1")
    a.job.name = "j"
    assert (b.pods.open, b.job.name) == ([], "")


def test_a_run_reads_back_from_flat_layer_documents() -> None:
    tops = {"ingest": 3}
    run = RunState(
        "r1", "g", ["ingest"], tops, created_at=T0, layers=build_layers(["ingest"], tops)
    )
    layer2 = {**STORED, "layer": 2}
    back = RunState.from_docs(run.run_doc(), [layer2, STORED])
    assert [ls.to_doc() for ls in back.ordered_layers()] == [layer2, STORED]
    assert "layers" not in back.run_doc()
