"""The tail watch's lease on the Firestore emulator (shared/adapters/google/watch_lease.py):
one holder at a time, released only by its holder, lapsed after its expiry, and apart from
the runs' reconcile leases."""

from __future__ import annotations

from datetime import timedelta

from shared.adapters.google.firestore_store import FirestoreRunStore
from tests.builders.stored_runs import NOW

LATER = NOW + timedelta(seconds=110)


def test_one_tick_holds_the_watch_lease_until_it_lets_go(store: FirestoreRunStore) -> None:
    assert store.claim_watch("a", LATER, NOW)
    assert not store.claim_watch("b", LATER, NOW + timedelta(seconds=1))
    store.release_watch("b")  # not the holder: nothing changes
    assert not store.claim_watch("b", LATER, NOW + timedelta(seconds=2))
    store.release_watch("a")
    assert store.claim_watch("b", LATER, NOW + timedelta(seconds=3))
    store.release_watch("b")
    store.release_watch("b")  # twice is harmless


def test_a_lease_whose_holder_died_lapses_at_its_expiry(store: FirestoreRunStore) -> None:
    assert store.claim_watch("dead", LATER, NOW)
    assert not store.claim_watch("next", LATER, LATER - timedelta(seconds=1))
    assert store.claim_watch("next", LATER + timedelta(seconds=60), LATER)


def test_the_watch_lease_is_not_a_runs_reconcile_lease(store: FirestoreRunStore, run) -> None:
    assert store.claim_watch("tick", LATER, NOW)
    verdict, _ = store.claim_reconcile(run.run_id, NOW, "event", NOW)
    assert verdict.value == "acquire"
