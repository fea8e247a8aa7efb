"""The tail watch's lease on the Firestore emulator (adapters/google/watch_lease.py):
one holder at a time, released only by its holder, lapsed after its expiry, and apart from
the runs' reconcile leases."""

from __future__ import annotations

from datetime import timedelta

from adapters.google.firestore_store import FirestoreRunStore
from tests.builders.stored_runs import NOW

LATER = NOW + timedelta(seconds=110)


def test_one_tick_holds_the_watch_lease_until_it_lets_go(store: FirestoreRunStore) -> None:
    assert store.acquire_watch_lease("a", LATER, NOW)
    assert not store.acquire_watch_lease("b", LATER, NOW + timedelta(seconds=1))
    store.release_watch_lease("b")  # not the holder: nothing changes
    assert not store.acquire_watch_lease("b", LATER, NOW + timedelta(seconds=2))
    store.release_watch_lease("a")
    assert store.acquire_watch_lease("b", LATER, NOW + timedelta(seconds=3))
    store.release_watch_lease("b")
    store.release_watch_lease("b")  # twice is harmless


def test_a_lease_whose_holder_died_lapses_at_its_expiry(store: FirestoreRunStore) -> None:
    assert store.acquire_watch_lease("dead", LATER, NOW)
    assert not store.acquire_watch_lease("next", LATER, LATER - timedelta(seconds=1))
    assert store.acquire_watch_lease("next", LATER + timedelta(seconds=60), LATER)


def test_the_watch_lease_is_not_a_runs_reconcile_lease(store: FirestoreRunStore, run) -> None:
    assert store.acquire_watch_lease("tick", LATER, NOW)
    verdict, _ = store.lease_for_event(run.run_id, NOW, "event", NOW)
    assert verdict.value == "acquire"
