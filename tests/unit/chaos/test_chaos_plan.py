"""The chaos plan (shared.chaos.chaos_plan) and the chaos verdict (shared.chaos.chaos_audit):
pure."""

from __future__ import annotations

from collections import Counter

import pytest

from shared.chaos import chaos_plan as cp
from shared.chaos.chaos_audit import audit_chunks, lost_chunks


@pytest.mark.parametrize(
    ("n", "kinds", "expected"),
    [
        (0, cp.KINDS, {}),
        (1, (cp.POD_SIGKILL,), {cp.POD_SIGKILL: 1}),
        (5, (cp.POD_SIGKILL, cp.CHUNK_FATAL), {cp.POD_SIGKILL: 4, cp.CHUNK_FATAL: 1}),
        (len(cp.CHEAP), cp.CHEAP, dict.fromkeys(cp.CHEAP, 1)),  # each cheap kind once
        (len(cp.KINDS), cp.KINDS, dict.fromkeys(cp.KINDS, 1)),
    ],
)
def test_kinds_are_dealt_by_weight(n, kinds, expected):
    assert cp.planned_by_kind(cp.plan_faults(n, 3, 100.0, kinds)) == expected


@pytest.mark.parametrize("n", [20, 200, 1000])
def test_large_plans_follow_the_weights(n):
    counts = cp.planned_by_kind(cp.plan_faults(n, 3, 100.0))
    assert sum(counts.values()) == n
    total = sum(cp.WEIGHTS.values())
    for kind, weight in cp.WEIGHTS.items():
        share = n * weight / total
        assert max(1, int(share)) <= counts[kind] <= max(1, int(share)) + 1, kind


def test_the_first_faults_hold_each_kind_once():
    first = [f.kind for f in sorted(cp.plan_faults(50, 9, 100.0), key=lambda f: f.seq)]
    assert sorted(first[: len(cp.KINDS)]) == sorted(cp.KINDS)


@pytest.mark.parametrize("n", [1, 7, 200])
def test_faults_are_spread_over_the_window_in_order(n):
    faults = cp.plan_faults(n, 11, 200.0)
    times = [f.at_s for f in faults]
    assert times == sorted(times)
    assert cp.START * 200 <= times[0] and times[-1] <= cp.END * 200
    assert sorted(f.seq for f in faults) == list(range(n))
    if n > 1:  # one per slot: no two faults share a slot's span
        slot = (cp.END - cp.START) * 200 / n
        for i, f in enumerate(sorted(faults, key=lambda f: f.seq)):
            assert cp.START * 200 + slot * i <= f.at_s <= cp.START * 200 + slot * (i + 1)


def test_the_seed_decides_and_only_the_seed():
    a, b = cp.plan_faults(40, 5, 90.0), cp.plan_faults(40, 5, 90.0)
    assert a == b
    c = cp.plan_faults(40, 6, 90.0)
    assert [f.kind for f in a] != [f.kind for f in c] or [f.at_s for f in a] != [f.at_s for f in c]
    assert Counter(f.kind for f in a) == Counter(f.kind for f in c)  # same shares


def test_fault_ids_are_unique_and_sort_by_seq():
    faults = cp.plan_faults(30, 1, 60.0)
    ids = [f.fault_id for f in sorted(faults, key=lambda f: f.seq)]
    assert ids == sorted(ids) and len(set(ids)) == 30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, cp.KINDS),
        ("all", cp.KINDS),
        ("cheap", cp.CHEAP),
        ("pod_sigkill, pubsub_drop,pod_sigkill", (cp.POD_SIGKILL, cp.PUBSUB_DROP)),
        ("pod_hung,pod_sigkill", (cp.POD_HUNG, cp.POD_SIGKILL)),
    ],
)
def test_parse_kinds(text, expected):
    assert cp.parse_kinds(text) == expected


def test_pod_hung_is_in_all_but_not_in_cheap():
    """A hung pod costs the controller's hung floor of wall time: planned in `all`, not in
    `cheap` (CI's set)."""
    assert cp.POD_HUNG in cp.KINDS and cp.POD_HUNG not in cp.CHEAP
    assert cp.planned_by_kind(cp.plan_faults(500, 1, 100.0))[cp.POD_HUNG] > 0
    kinds = (cp.POD_HUNG, cp.POD_SIGKILL, cp.PUBSUB_DROP)
    assert cp.planned_by_kind(cp.plan_faults(14, 1, 100.0, kinds)) == {
        cp.POD_HUNG: 2, cp.POD_SIGKILL: 6, cp.PUBSUB_DROP: 6,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cp.parse_kinds("pod_sigkil"), "pod_sigkil"),
        (lambda: cp.parse_kinds(","), "--chaos-kinds"),
        (lambda: cp.plan_faults(-1, 0, 10.0), "--chaos"),
        (lambda: cp.plan_faults(3, 0, 0.0), "expected wall time"),
    ],
)
def test_bad_arguments_name_the_option(call, message):
    with pytest.raises(cp.ChaosPlanError, match=message):
        call()


def _r(event, token, t, prev=None, chunk=5, stage="ingest"):
    return {
        "event": event,
        "stage": stage,
        "chunk_id": chunk,
        "token": token,
        "previous_token": prev,
        "t": t,
    }


@pytest.mark.parametrize(
    ("records", "done_cells", "unsafe", "redone"),
    [
        # one attempt, done once: fine
        ([_r("begun", 1, 0), _r("returned", 1, 1), _r("done", 1, 2)], {}, 0, 0),
        # killed mid-chunk, the retry knew it: a safe redo is not even a double
        ([_r("begun", 1, 0), _r("begun", 2, 5, prev=1), _r("returned", 2, 6)], {}, 0, 0),
        # claim lost after returning, the next attempt knew it: a safe redo
        ([_r("begun", 1, 0), _r("returned", 1, 1), _r("begun", 2, 3, prev=1),
          _r("returned", 2, 4), _r("done", 2, 5)], {}, 0, 1),
        # ... knew it through a third attempt that died in between
        ([_r("begun", 1, 0), _r("returned", 1, 1), _r("begun", 3, 2, prev=1),
          _r("begun", 2, 3, prev=3), _r("returned", 2, 4)], {}, 0, 1),
        # the second ran it to completion without knowing the first: unsafe
        ([_r("begun", 1, 0), _r("returned", 1, 1), _r("begun", 2, 3),
          _r("returned", 2, 4)], {}, 1, 0),
        # two at once (the second began before the first returned): unsafe
        ([_r("begun", 1, 0), _r("begun", 2, 0.5, prev=1), _r("returned", 1, 1),
          _r("returned", 2, 2)], {}, 1, 0),
        # two done writes in the attempt records, or in the ledger: unsafe
        ([_r("done", 1, 1), _r("done", 2, 2)], {}, 1, 0),
        ([_r("done", 1, 1)], {("ingest", 5): 2}, 1, 0),
        # A still writing when B began; B returns and is marked done: unsafe (A's late rows
        # land after B's clean-up), whether A ever returns or not
        ([_r("begun", 1, 0), _r("wrote", 1, 1), _r("begun", 2, 2, prev=1),
          _r("wrote", 2, 3), _r("returned", 2, 4), _r("done", 2, 5), _r("wrote", 1, 6)],
         {}, 1, 0),
        ([_r("begun", 1, 0), _r("begun", 2, 2, prev=1), _r("returned", 2, 4),
          _r("done", 2, 5), _r("returned", 1, 6)], {}, 1, 0),
        # ... but a zombie fenced after B began (it wrote nothing more) is safe
        ([_r("begun", 1, 0), _r("wrote", 1, 1), _r("begun", 2, 2, prev=1),
          _r("returned", 2, 4), _r("done", 2, 5), _r("zombie_resumed", 1, 6)], {}, 0, 0),
        # ... and so is a late write when B never finished (a third attempt redoes it)
        ([_r("begun", 1, 0), _r("begun", 2, 2, prev=1), _r("wrote", 1, 3)], {}, 0, 0),
        # other chunks and stages do not mix
        ([_r("returned", 1, 1), _r("returned", 2, 2, chunk=6),
          _r("returned", 3, 3, stage="l2cache")], {("ingest", 6): 1}, 0, 0),
    ],
)  # fmt: skip
def test_unsafe_doubles(records, done_cells, unsafe, redone):
    verdict = audit_chunks(records, done_cells)
    assert (verdict.unsafe, verdict.redone) == (unsafe, redone)
    assert len(verdict.unsafe_chunks) == unsafe == len(verdict.reasons)


def test_lost_chunks_are_those_without_a_done_marker():
    assert lost_chunks([1, 2, 3, 3], {2, 9}) == [1, 3]
    assert lost_chunks([], set()) == []
