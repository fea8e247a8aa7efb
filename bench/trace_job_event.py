"""The steps of one Job event's trip through the controller: how many of the project's own
functions it enters, and how many reads it asks of the cluster.

The controller is the contract tests' (tests/contract/test_controller.py): `Controller` over
the Firestore emulator's run store and the recording fake of the cluster. One Job event is
handed to `Controller.on_job_event` for each case, and only that call is traced:

- `create`: layer 2's Job completed, auto mode: the event's reconcile creates layer 3's Job;
- `approval`: the same in approve mode with only layer 2 approved: no Job, an
  `approval_needed` alert;
- `failed-index`: layer 2's Job reports index 1 failed (one failed pod with a log): the
  `failed_indexes` alert, with the index's pod and its log tail.

"Entries" are the Python function calls whose code is a file of `shared/`, `adapters/` or
`functions/` (`sys.setprofile`'s `call` events: the event's whole trip, the Firestore
adapter's included, the client libraries and the fake not). "Cluster reads" are the calls of
the `ClusterReader` port, counted by a wrapper handed to the controller as its cluster.

    python bench/trace_job_event.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.google.firestore_store import FirestoreRunStore  # noqa: E402
from adapters.local.emulators import EmulatorSet  # noqa: E402
from shared.config.config_files import load_config  # noqa: E402
from shared.control.controller import Controller  # noqa: E402
from shared.control.job_events import JobEvent  # noqa: E402
from shared.operate import operator_actions as ops  # noqa: E402
from shared.ports.cluster import JobStatus  # noqa: E402
from shared.reconcile.build_plan import new_run  # noqa: E402
from tests.builders.fakes import PodCluster, RecordingCluster  # noqa: E402
from tests.builders.stored_runs import DEMO, NOW  # noqa: E402

OWN = tuple(str(ROOT / d) + os.sep for d in ("shared", "adapters", "functions"))
READS = (
    "get_job",
    "list_jobs",
    "list_pods",
    "pod_log_updated",
    "pod_log",
    "job_events",
    "pod_events",
    "node_oom_events",
    "pod_usage",
)
CASES = ("create", "approval", "failed-index")


@dataclass
class CountingCluster:
    """The cluster the controller is handed: every call goes to `inner`; the reads (the
    `ClusterReader` port's methods) are counted by name. A method `inner` lacks is missing
    here too, so the controller sees the same cluster."""

    inner: RecordingCluster
    reads: Counter[str] = field(default_factory=Counter)
    counting: bool = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in READS or not callable(attr):
            return attr

        def read(*args: Any, **kwargs: Any) -> Any:
            if self.counting:
                self.reads[name] += 1
            return attr(*args, **kwargs)

        return read


@dataclass
class Clock:
    """The controller's clock, moved by hand: the event comes after the reconcile before it."""

    now: datetime = NOW

    def __call__(self) -> datetime:
        return self.now


@contextmanager
def entries() -> Iterator[Counter[str]]:
    """Count the calls into the project's own files while the block runs (by package)."""
    counts: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(OWN):
            rel = Path(frame.f_code.co_filename).relative_to(ROOT)
            counts[rel.parts[0]] += 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)


def _event(job_name: str, reason: str, at: datetime) -> JobEvent:
    return JobEvent(uuid.uuid4().hex, job_name, "default", reason, "", at)


def trace(case: str, project: str) -> dict[str, Any]:
    """One Job event of `case` through a fresh controller: entries, cluster reads, outcome."""
    store = FirestoreRunStore(project)
    advance = "approve" if case == "approval" else "auto"
    state = new_run(load_config(DEMO), "r1", ["ingest"], advance, NOW)
    state.setups.clear()  # the layers only, as the contract tests drive them
    if case == "approval":
        ops.approve(state, "ingest", [2], "bench", NOW)
    store.create_run(state)
    inner = PodCluster() if case == "failed-index" else RecordingCluster()
    cluster = CountingCluster(inner)
    clock = Clock()
    alerts: list[str] = []
    controller = Controller(store, cluster, lambda kind, _body: alerts.append(kind), clock=clock)
    controller.reconcile("r1")  # layer 2's Job, untraced
    job: JobStatus = inner.jobs[store.load_run("r1").layers["ingest-L2"].job.name]
    last = job.completions - 1
    if case == "failed-index":
        inner.finish(job.name, failed_indexes="1", completed_indexes=f"2-{last}", failed=1)
        reason = "FailedIndexes"
    else:
        inner.finish(
            job.name, condition="Complete", completed_indexes=f"0-{last}", completion_time=NOW
        )
        reason = "Completed"
    clock.now = NOW + timedelta(seconds=30)
    alerts.clear()
    created_before = len(inner.creates)
    cluster.counting = True
    with entries() as counts:
        result = controller.on_job_event(_event(job.name, reason, NOW + timedelta(seconds=20)))
    cluster.counting = False
    if result is None:
        raise RuntimeError(f"{case}: the Job event was not reconciled (dropped or covered)")
    return {
        "case": case,
        "entries": sum(counts.values()),
        "entries_by_package": dict(sorted(counts.items())),
        "cluster_reads": sum(cluster.reads.values()),
        "cluster_reads_by_call": dict(sorted(cluster.reads.items())),
        "jobs_created": inner.creates[created_before:],
        "alerts": alerts,
    }


def main(argv: list[str] | None = None) -> None:
    """Trace every case on the Firestore emulator and print a table, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    with EmulatorSet(("firestore",)) as emus:
        os.environ.update(emus.env)
        rows = [trace(case, f"trace-{uuid.uuid4().hex[:6]}") for case in CASES]
    if not args.json:
        print(f"{'case':14} {'entries':>8} {'cluster reads':>14}  outcome")
        for row in rows:
            outcome = ", ".join(row["jobs_created"] + row["alerts"]) or "-"
            print(f"{row['case']:14} {row['entries']:>8} {row['cluster_reads']:>14}  {outcome}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
