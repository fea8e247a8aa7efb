"""Administrative Firestore operations the controller never does: purging a run.

A run's documents are `runs/{run}` with its subcollections (`layers/{key}`, each layer's
`pods/{uid}`, `alerts/{id}`) and the `jobs/{job name}` entries that map its Jobs (every
attempt) back to it; see adapters.google.firestore_store for the layout. `dedupe/` records
are not per run and expire by their TTL.
"""

from __future__ import annotations

from google.cloud import firestore

from adapters.google.firestore_layout import JOBS, RUNS

BATCH_LIMIT = 500  # Firestore's writes per batch


def run_job_names(db: firestore.Client, run_id: str) -> list[str]:
    """Names of every Job recorded for the run (all attempts), from the `jobs` map."""
    query = db.collection(JOBS).where(filter=firestore.FieldFilter("run_id", "==", run_id))
    return sorted(d.id for d in query.stream())


def purge_run(db: firestore.Client, run_id: str) -> int:
    """Delete the run document, everything below it and its `jobs` entries; the number of
    documents deleted (0: nothing of that run was stored). Idempotent: a purge interrupted
    half-way is finished by running it again. Kubernetes is not touched."""
    run_ref = db.collection(RUNS).document(run_id)
    existed = run_ref.get().exists
    # recursive_delete (client >= 2.3) walks every subcollection, whatever its name, and
    # deletes through a BulkWriter; it counts the document itself even if it did not exist.
    deleted = db.recursive_delete(run_ref, chunk_size=BATCH_LIMIT) - (0 if existed else 1)
    names = run_job_names(db, run_id)
    for start in range(0, len(names), BATCH_LIMIT):
        batch = db.batch()
        for name in names[start : start + BATCH_LIMIT]:
            batch.delete(db.collection(JOBS).document(name))
        batch.commit()
    return deleted + len(names)
