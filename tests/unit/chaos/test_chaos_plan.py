"""The chaos plan (shared.chaos.chaos_plan) and the chaos verdict (shared.chaos.chaos_audit):
pure."""

from __future__ import annotations

from collections import Counter

import pytest

from shared.chaos import chaos_plan as cp
from shared.chaos.chaos_audit import audit_chunks, lost_chunks, struck_outcomes


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


def _pace(elapsed=100.0, progress=1.0, waiting=False, since_outage=None):
    return cp.Pace(elapsed, progress, waiting, since_outage)


@pytest.mark.parametrize(
    ("kind", "at_s", "pace", "due"),
    [
        (cp.PUBSUB_DROP, 10.0, _pace(elapsed=9.9), False),  # its offset is still to come
        (cp.PUBSUB_DROP, 10.0, _pace(elapsed=10.0, progress=0.2), True),  # 10 s of 50: 0.2
        (cp.PUBSUB_DROP, 10.0, _pace(elapsed=300.0, progress=0.19), False),  # a slowed run
        (cp.POD_SIGKILL, 10.0, _pace(), True),
        (cp.POD_SIGKILL, 10.0, _pace(waiting=True), False),  # another waits for a worker
        (cp.CHUNK_TRANSIENT, 10.0, _pace(waiting=True), False),
        (cp.HOST_KILLED, 10.0, _pace(waiting=True), True),  # not a worker's fault
        (cp.CLUSTER_API_DOWN, 10.0, _pace(), True),  # the first outage
        (cp.CLUSTER_API_DOWN, 10.0, _pace(since_outage=cp.OUTAGE_GAP_S - 0.1), False),
        (cp.CLUSTER_API_DOWN, 10.0, _pace(since_outage=cp.OUTAGE_GAP_S), True),
        (cp.PUBSUB_DELAY, 10.0, _pace(since_outage=1.0), True),  # only outages keep apart
    ],
)
def test_a_fault_is_due_when_its_time_and_the_runs_progress_have_come(kind, at_s, pace, due):
    assert cp.is_due(cp.Fault(0, kind, at_s), 50.0, pace) is due


@pytest.mark.parametrize(
    ("done", "totals", "share"),
    [
        ({}, {}, 0.0),
        ({}, {"ingest-L2": 8}, 0.0),
        ({"ingest-L2": 4}, {"ingest-L2": 8, "ingest-L3": 2}, 0.4),
        ({"ingest-L2": 8, "ingest-L3": 2}, {"ingest-L2": 8, "ingest-L3": 2}, 1.0),
        ({"ingest-L2": 99}, {"ingest-L2": 8, "ingest-L3": 2}, 0.8),  # capped at its total
    ],
)
def test_the_builds_progress_is_its_share_of_job_indexes_done(done, totals, share):
    assert cp.build_progress(done, totals) == pytest.approx(share)


def _struck(token=7, rows=(1, 2), zombie=False, kind=cp.POD_SIGKILL):
    return {
        "fault_id": f"00001-{kind}",
        "kind": kind,
        "pod": "p",
        "stage": "ingest",
        "chunk_id": 5,
        "token": token,
        "zombie": zombie,
        "rows_at_kill": list(rows),
    }


@pytest.mark.parametrize(
    ("struck", "final", "bad", "done_by", "resumed", "expected"),
    [
        # The retry cleaned up: the kill's rows are gone, the chunk right.
        (_struck(), {3, 4}, set(), {("ingest", 5): 8}, set(), {"partial_writes_recovered": 1}),
        # ... but the chunk is wrong: not counted as recovered.
        (_struck(), {3}, {("ingest", 5)}, {("ingest", 5): 8}, set(), {}),
        # The kill's rows are still there under another attempt's marker: left.
        (_struck(), {1, 3}, set(), {("ingest", 5): 8}, set(), {"partial_writes_left": 1}),
        # The struck attempt's own token is on the marker: the fault never stopped it.
        (_struck(), {1, 2}, set(), {("ingest", 5): 7}, set(), {"struck_attempts_finished": 1}),
        # A zombie finishing its chunk under its live claim does so by design.
        (
            _struck(zombie=True, kind=cp.NODE_LOST),
            {1, 2},
            set(),
            {("ingest", 5): 7},
            {(7, 5)},
            {"zombies": 1, "zombie_chunks_finished": 1},
        ),
        # A zombie that resumed, its chunk marked by its replacement: fenced.
        (
            _struck(zombie=True, kind=cp.NODE_LOST),
            {3},
            set(),
            {("ingest", 5): 8},
            {(7, 5)},
            {"zombies": 1, "zombie_writes_fenced": 1, "partial_writes_recovered": 1},
        ),
        # No rows at the kill: nothing to recover.
        (_struck(rows=()), {3}, set(), {("ingest", 5): 8}, set(), {}),
    ],
)
def test_each_struck_attempt_ends_one_way(struck, final, bad, done_by, resumed, expected):
    out = struck_outcomes([struck], final, bad, done_by, resumed)
    counts = {k: v for k, v in vars(out).items() if k != "left_detail" and v}
    assert counts == expected
    assert len(out.left_detail) == expected.get("partial_writes_left", 0)
    if out.left_detail:
        assert out.left_detail[0]["done_by"] == 8 and out.left_detail[0]["rows_in_final_table"] == 1
