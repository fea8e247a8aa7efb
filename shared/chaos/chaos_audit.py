"""Chaos verdicts from the workers' attempt records and the ledger's done cells. Pure module.

The demo's chaos verdict counts from the output tables (`demo.chunk_audit`); these rules
explain its findings and catch the races that left the data right by luck.

A chunk is *processed twice where unsafe* when either
- its done marker was written more than once (two done cells in the ledger, or two
  attempts that each recorded writing it), or
- an attempt A wrote rows, returned or marked done after a later attempt B began, and B
  ran the chunk to completion (A was still at work while B cleaned up and wrote: A's late
  rows stay), or
- the plugin ran it to completion in two attempts A then B where B did not know of A:
  B began before A returned (two live computations at once), or B's chain of prior
  attempts (`previous_token`: the unfinished attempt each begin found in the ledger, whose
  own begin found the one before, ...) does not reach A's token. Such a B could not have
  cleaned up after A (docs/chaos.md).

A chunk redone by an attempt that knew of the earlier one is a safe redo (`redone`).
A chunk is *lost* when its layer finished but the ledger has no done marker for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChunkVerdict:
    """Totals over every chunk audited."""

    unsafe: int = 0  # chunks processed twice where unsafe
    redone: int = 0  # chunks run to completion more than once, each time knowingly
    unsafe_chunks: tuple[str, ...] = ()  # "stage:chunk_id" of the unsafe ones (first 20)
    reasons: dict[str, str] = field(default_factory=dict)  # why, for every unsafe one


def _knows(later: dict[str, Any], earlier_token: int, begun: dict[int, dict[str, Any]]) -> bool:
    """Whether `later`'s chain of prior attempts reaches `earlier_token`."""
    seen: set[int] = set()
    token = later.get("previous_token")
    while token is not None and token not in seen:
        if token == earlier_token:
            return True
        seen.add(token)
        token = begun.get(token, {}).get("previous_token")
    return False


WRITING = ("wrote", "returned", "done")  # an attempt still at work when it records these


def _overlap(recs: list[dict[str, Any]], begun: dict[int, dict[str, Any]]) -> str | None:
    """Why two attempts of one chunk ran at once, or None: an attempt A wrote, returned or
    marked done after a later attempt B began, and B ran the chunk to completion (B's
    clean-up ran before A's late rows: they stay)."""
    finished = {r["token"] for r in recs if r["event"] == "returned"}
    for b in sorted(begun.values(), key=lambda r: r.get("t", 0.0)):
        if b["token"] not in finished:
            continue
        tb = b.get("t", 0.0)
        for r in recs:
            a = begun.get(r["token"])
            if (
                r["event"] in WRITING
                and r["token"] != b["token"]
                and a is not None
                and a.get("t", 0.0) <= tb
                and r.get("t", 0.0) > tb
            ):
                return f"attempt {r['token']} {r['event']} after attempt {b['token']} began"
    return None


def audit_chunks(
    records: Iterable[dict[str, Any]], done_cells: dict[tuple[str, int], int] | None = None
) -> ChunkVerdict:
    """The verdict over attempt `records` (worker.chaos_points: `begun`, `wrote`,
    `returned`, `done` with `stage`, `chunk_id`, `token`, `previous_token`, `t`) and the
    ledger's count of done cells by (stage, chunk id)."""
    by_chunk: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_chunk[(str(r["stage"]), int(r["chunk_id"]))].append(r)
    done_cells = done_cells or {}
    unsafe: list[str] = []
    reasons: dict[str, str] = {}
    redone = 0
    for key in sorted(set(by_chunk) | set(done_cells)):
        recs = sorted(by_chunk.get(key, []), key=lambda r: r.get("t", 0.0))
        begun = {r["token"]: r for r in recs if r["event"] == "begun"}
        returned = [r for r in recs if r["event"] == "returned"]
        dones = sum(r["event"] == "done" for r in recs)
        why = None
        if max(dones, done_cells.get(key, 0)) > 1:
            why = "marked done twice"
        for a, b in zip(returned, returned[1:], strict=False):
            b_begun = begun.get(b["token"], b)
            if b_begun.get("t", 0.0) < a.get("t", 0.0):
                why = why or f"attempt {b['token']} began before attempt {a['token']} returned"
            elif not _knows(b_begun, a["token"], begun):
                why = why or f"attempt {b['token']} did not know of attempt {a['token']}"
        why = why or _overlap(recs, begun)
        name = f"{key[0]}:{key[1]}"
        if why:
            unsafe.append(name)
            reasons[name] = why
        elif len(returned) > 1:
            redone += 1
    return ChunkVerdict(len(unsafe), redone, tuple(unsafe[:20]), reasons)


def lost_chunks(expected: Iterable[int], done: set[int]) -> list[int]:
    """The expected chunk ids without a done marker."""
    return sorted(set(expected) - done)


@dataclass(frozen=True)
class ZombieClaims:
    """What zombies met when they claimed a chunk after their own was taken over
    (``zombie_claim`` records of ``worker.chaos_points.claim``; docs/zombies.md)."""

    refused: int = 0  # claims refused: the holder was live (a zombie's replacement)
    live_taken: int = 0  # live claims taken over anyway: the bug the takeover window prevents


def zombie_claims(records: Iterable[dict[str, Any]]) -> ZombieClaims:
    """Count the zombies' claims refused, and the live claims they took over (``result``
    ``taken_over`` while the holder was ``live``)."""
    claims = [r for r in records if r.get("event") == "zombie_claim"]
    return ZombieClaims(
        refused=sum(r.get("result") == "held_by_other" for r in claims),
        live_taken=sum(r.get("result") == "taken_over" and bool(r.get("live")) for r in claims),
    )


@dataclass
class StruckOutcomes:
    """What became of the attempts pod faults struck mid-write (`struck_outcomes`)."""

    partial_writes_recovered: int = 0  # the kill's rows gone from the final table, chunk right
    partial_writes_left: int = 0  # the kill's rows still there, the chunk marked by another
    struck_attempts_finished: int = 0  # not a zombie, yet it marked its own chunk done
    zombies: int = 0
    zombie_chunks_finished: int = 0  # a zombie kept its live claim and marked its chunk done
    zombie_writes_fenced: int = 0  # a zombie resumed; another attempt marked its chunk
    # One entry per struck attempt whose rows at the kill are in the final table.
    left_detail: list[dict[str, Any]] = field(default_factory=list)


def struck_outcomes(
    struck: Iterable[dict[str, Any]],
    final_ids: set[int],
    bad_chunks: set[tuple[str, int]],
    done_by: dict[tuple[str, int], int],
    resumed: set[tuple[int, int]],
) -> StruckOutcomes:
    """Classify each struck attempt (the injector's `struck`: its fault, stage, chunk id,
    token, zombie flag and `rows_at_kill`) against the final table's node ids, the chunks
    the data audit found wrong (`bad_chunks`, by stage and chunk id), the done markers' tokens
    (`done_by`) and the zombies' `zombie_resumed` records (token, chunk id).

    An attempt whose own token is on its chunk's done marker finished the chunk: a zombie
    does so by design (its live claim may not be taken over, docs/zombies.md); any other
    struck attempt doing so means the fault never stopped it (the kill missed, or the hold
    timed out first), so its rows are the chunk's rows, not a leftover, and it is counted
    apart. Rows at the kill still in the table under another attempt's marker are a partial
    write left."""
    out = StruckOutcomes()
    for s in struck:
        rows, key = set(s.get("rows_at_kill", ())), (str(s["stage"]), int(s["chunk_id"]))
        zombie, own = bool(s.get("zombie")), done_by.get(key) == s.get("token")
        out.zombies += zombie
        if own:
            if zombie:
                out.zombie_chunks_finished += 1
            else:
                out.struck_attempts_finished += 1
            continue
        if rows & final_ids:
            out.partial_writes_left += 1
            out.left_detail.append(
                {
                    "fault_id": s.get("fault_id"),
                    "kind": s.get("kind"),
                    "pod": s.get("pod"),
                    "stage": key[0],
                    "chunk_id": key[1],
                    "token": s.get("token"),
                    "done_by": done_by.get(key),
                    "rows_at_kill": len(rows),
                    "rows_in_final_table": len(rows & final_ids),
                }
            )
        elif rows and key not in bad_chunks:
            out.partial_writes_recovered += 1
        if zombie and (s.get("token"), key[1]) in resumed and key in done_by:
            out.zombie_writes_fenced += 1
    return out
