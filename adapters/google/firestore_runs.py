"""The runs role of the run store on Firestore: runs, their layers, the Job-name map, pod
records and `pipeline apply`'s history (layout: `firestore_layout.py`). Every state
transition is one atomic batch whose run-document write carries a precondition (the update
time of the version the caller decided from), so of two racing reconciles exactly one
commits.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from adapters.google.firestore_layout import (
    ALERTS,
    CONFIG_VERSIONS,
    HEALTH,
    JOBS,
    LAYERS,
    PODS,
    RUNS,
    FirestoreDocs,
    RunRead,
)
from adapters.google.firestore_outbox import outbox_doc
from shared.model.phase import RunStatus
from shared.model.state import RunState
from shared.ports.run_store import RunExistsError, RunNotFoundError, StaleStateError

# Pod records per page document: ~300 bytes each, well under the 1 MiB document limit.
POD_PAGE = 1000
POD_TIMES = ("created", "started", "finished")


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot store {type(value).__name__} in a pod record")


def _with_times(rec: dict[str, Any]) -> dict[str, Any]:
    for key in POD_TIMES:
        if isinstance(rec.get(key), str):
            rec[key] = datetime.fromisoformat(rec[key])
    return rec


class FirestoreRuns(FirestoreDocs):
    """RunRecords on Firestore."""

    def __init__(self, project: str, client: firestore.Client | None = None) -> None:
        super().__init__(project, client)
        self._job_runs: dict[str, str] = {}

    def create_run(self, state: RunState) -> None:
        batch = self.db.batch()
        batch.create(self._run(state.run_id), state.run_doc())
        for ls in state.layers.values():
            batch.set(self._run(state.run_id).collection(LAYERS).document(ls.key), ls.to_doc())
        try:
            batch.commit()
        except gexc.AlreadyExists:
            raise RunExistsError(
                f"run {state.run_id!r} already exists: pick another id, or "
                f"`pipeline resume {state.run_id}`"
            ) from None

    def load_run(self, run_id: str) -> RunState:
        snap = self._run(run_id).get()
        if not snap.exists:
            self._remember_read(run_id, None)
            raise RunNotFoundError(f"no run {run_id!r} (see `pipeline runs`)")
        doc = snap.to_dict()
        # The layers are read after the run document, so a commit between the two reads
        # changes the run document too, and the commit from this state fails its precondition.
        layers = [d.to_dict() for d in self._run(run_id).collection(LAYERS).stream()]
        self._remember_read(
            run_id, RunRead(int(doc.get("version", 0)), snap.update_time, bool(doc.get(HEALTH)))
        )
        return RunState.from_docs(doc, layers)

    def commit(
        self,
        before: RunState,
        after: RunState,
        alerts: list[dict[str, Any]] = (),
        pod_records: dict[str, list[dict[str, Any]]] | None = None,
        config_versions: list[dict[str, Any]] = (),
    ) -> None:
        run_ref = self._run(before.run_id)
        run_doc = after.run_doc()
        run_doc["version"] = before.version + 1
        changed = [
            ls
            for key, ls in after.layers.items()
            if key not in before.layers or before.layers[key].to_doc() != ls.to_doc()
        ]
        # Every Job the commit names for the first time (a layer's, its canary's, a setup's):
        # its events reconcile this run (the `jobs` map).
        known = set(before.job_names())
        new_jobs = [name for name in after.job_names() if name not in known]
        now = datetime.now(UTC)
        # Optimistic concurrency without a transaction: a transaction's read lock makes
        # concurrent reconciles abort each other (the emulator livelocks four of them). A
        # precondition on the update time of the version decided from is just as strict:
        # any later write (a commit, a health record) changes it and fails this one.
        seen = self._version_seen(before)
        self._write_pod_records(run_ref, before.version, pod_records or {})
        batch = self.db.batch()
        batch.update(
            run_ref, run_doc, option=self.db.write_option(last_update_time=seen.update_time)
        )
        for ls in changed:
            batch.set(run_ref.collection(LAYERS).document(ls.key), ls.to_doc())
        for name in new_jobs:
            batch.set(self.db.collection(JOBS).document(name), {"run_id": before.run_id})
        for alert in alerts:
            batch.set(run_ref.collection(ALERTS).document(uuid.uuid4().hex), outbox_doc(alert, now))
        for entry in config_versions:
            batch.set(self._config_version_ref(before.run_id, entry), _config_version_doc(entry))
        try:
            results = batch.commit()
        except (gexc.FailedPrecondition, gexc.Aborted) as e:
            self._remember_read(before.run_id, None)  # the next commit reads it afresh
            raise StaleStateError(f"run {before.run_id}: changed while committing ({e})") from None
        after.version = before.version + 1
        # The run document as written (its update is the batch's first write); its health
        # field is as seen, since nothing wrote the document in between.
        self._remember_read(
            before.run_id, RunRead(after.version, results[0].update_time, seen.health)
        )

    def _version_seen(self, before: RunState) -> RunRead:
        """The run document at `before.version` as this client last saw it (load_run), or as
        read now; StaleStateError if it is at another version by now."""
        seen = self._run_reads.get(before.run_id)
        if seen is not None and seen.version == before.version:
            return seen
        snap = self._run(before.run_id).get()
        doc = (snap.to_dict() or {}) if snap.exists else {}
        stored = doc.get("version") if snap.exists else None
        if stored != before.version:
            raise StaleStateError(
                f"run {before.run_id}: version {stored} != {before.version} (changed)"
            )
        seen = RunRead(before.version, snap.update_time, bool(doc.get(HEALTH)))
        self._remember_read(before.run_id, seen)
        return seen

    def _write_pod_records(
        self,
        run_ref: firestore.DocumentReference,
        version: int,
        records: dict[str, list[dict[str, Any]]],
    ) -> None:
        """Pod attempts in pages of POD_PAGE records (one document each), so a reconcile that
        sees a thousand pods finish writes a handful of documents, not a thousand. Written
        before the state commit; the page id names the version decided from and the pods it
        holds, so a retry of the same decision rewrites the same page, and a page written by
        a reconcile that then lost its commit only repeats pods a later page records again:
        `pod_records` keeps one record per uid."""
        writes = []
        for key, recs in records.items():
            pods = run_ref.collection(LAYERS).document(key).collection(PODS)
            for start in range(0, len(recs), POD_PAGE):
                page = recs[start : start + POD_PAGE]
                digest = hashlib.blake2b("".join(r["uid"] for r in page).encode(), digest_size=8)
                page_id = f"v{version:010d}-{digest.hexdigest()}"
                # One JSON string, not an array of maps: the client library encodes each
                # value of a document separately, which costs more than the round trip.
                body = json.dumps(page, default=_iso)
                writes.append((pods.document(page_id), {"records_json": body, "count": len(page)}))
        for start in range(0, len(writes), 500):
            batch = self.db.batch()
            for ref, doc in writes[start : start + 500]:
                batch.set(ref, doc)
            batch.commit()

    def pod_records(self, run_id: str, key: str) -> list[dict[str, Any]]:
        """Every recorded pod attempt of one layer, one per uid (pages and the older
        one-document-per-pod layout alike)."""
        pods = self._run(run_id).collection(LAYERS).document(key).collection(PODS)
        by_uid: dict[str, dict[str, Any]] = {}
        for snap in pods.stream():
            doc = snap.to_dict()
            if "records_json" in doc:
                page = [_with_times(rec) for rec in json.loads(doc["records_json"])]
            else:
                page = [doc]
            for rec in page:
                by_uid[rec["uid"]] = rec
        return list(by_uid.values())

    def run_version(self, run_id: str) -> int:
        snap = self._run(run_id).get(field_paths=["version"])
        if not snap.exists:
            raise RunNotFoundError(f"no run {run_id!r} (see `pipeline runs`)")
        return int(snap.get("version"))

    def update_run(self, run_id: str, mutate: Callable[[RunState], None]) -> RunState:
        for _ in range(10):
            before = self.load_run(run_id)
            after = RunState.from_docs(
                before.run_doc(), [ls.to_doc() for ls in before.layers.values()]
            )
            mutate(after)
            try:
                self.commit(before, after)
                return after
            except StaleStateError:
                continue
        raise StaleStateError(f"run {run_id}: too much contention, try again")

    def run_for_job(self, job_name: str) -> str | None:
        # A Job name belongs to one run for good (names are salted with the run id), so a
        # function instance remembers what it found: an event storm reads it once.
        if job_name in self._job_runs:
            return self._job_runs[job_name]
        snap = self.db.collection(JOBS).document(job_name).get()
        run_id = snap.get("run_id") if snap.exists else None
        if run_id is not None and len(self._job_runs) < 10_000:
            self._job_runs[job_name] = run_id
        return run_id

    def active_runs(self) -> list[str]:
        query = self.db.collection(RUNS).where(
            filter=firestore.FieldFilter("status", "in", [RunStatus.RUNNING, RunStatus.PAUSED])
        )
        return [d.id for d in query.stream()]

    def add_config_version(self, run_id: str, entry: dict[str, Any]) -> None:
        """Record one `pipeline apply` (its `version` names the document; the run document
        already holds that version's config)."""
        self._config_version_ref(run_id, entry).set(_config_version_doc(entry))

    def _config_version_ref(self, run_id: str, entry: dict[str, Any]) -> Any:
        return self._run(run_id).collection(CONFIG_VERSIONS).document(f"{entry['version']:06d}")

    def config_versions(self, run_id: str) -> list[dict[str, Any]]:
        """The run's `pipeline apply` history, oldest first."""
        out = []
        for snap in self._run(run_id).collection(CONFIG_VERSIONS).stream():
            doc = snap.to_dict()
            doc["changes"] = json.loads(doc.pop("changes_json", "[]"))
            out.append(doc)
        return sorted(out, key=lambda d: d["version"])

    def runs_of_graph(self, graph_id: str) -> list[RunState]:
        """Every run of one graph (layers not loaded), for the one-active-run guard."""
        query = self.db.collection(RUNS).where(
            filter=firestore.FieldFilter("graph_id", "==", graph_id)
        )
        return [RunState.from_docs(d.to_dict(), []) for d in query.stream()]

    def list_runs(self) -> list[RunState]:
        runs = [RunState.from_docs(d.to_dict(), []) for d in self.db.collection(RUNS).stream()]
        epoch = datetime.min.replace(tzinfo=UTC)
        return sorted(runs, key=lambda r: r.created_at or epoch, reverse=True)


def _config_version_doc(entry: dict[str, Any]) -> dict[str, Any]:
    """A config history entry as stored: the diff as JSON text (values may be lists of
    lists, a chunk size in an override, which Firestore cannot nest)."""
    doc = {k: v for k, v in entry.items() if k != "changes"}
    return {**doc, "changes_json": json.dumps(entry["changes"], default=str)}
