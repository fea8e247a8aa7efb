"""`pipeline demo --chaos N`: the demo build with N faults injected, and the chaos verdict.

`ChaosSession` plugs into `scripts.demo_run.run_demo`: once the stack is up it starts the
injector (`adapters.local.chaos`) on the plan (`shared.chaos.chaos_plan`); while the run
goes it plays the operator where one is needed (a layer failed, its alert published: the
layer is re-submitted as `pipeline submit` does); once the run ended it reads the ledger and
the workers' attempt records for the verdict (`shared.chaos.chaos_audit`): chunks lost, chunks
processed twice where unsafe. `summary_fields` is what `--json` adds.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.cloud.bigtable.data import ReadRowsQuery

from adapters import chaos_mailbox as mb
from adapters.bigtable.chunk_ledger import CHUNK_DONE, BigtableChunkLedger, chunk_row_key
from adapters.bigtable.ledger_filters import column_filter
from adapters.local.chaos import ChaosInjector
from demo.chunk_audit import ChunkFinding, audit_ingest
from demo.common import volume as load_volume
from demo.graph_table import read_all_nodes, read_chunk_nodes
from shared.chaos import chaos_plan as cp
from shared.chaos.chaos_audit import (
    StruckOutcomes,
    audit_chunks,
    lost_chunks,
    struck_outcomes,
    zombie_claims,
)
from shared.config.config import PipelineConfig
from shared.jobs.layer_spec import layer_spec
from shared.model.chunk_keys import chunk_id_from_row_key
from shared.model.layers import chunk_coord, chunk_id, segment_bits
from shared.model.phase import Phase
from shared.model.state import RunState, layer_key
from shared.operate import operator_actions as ops

log = logging.getLogger("cave_pipeline.chaos")

OBSERVE_EVERY_S = 2.0  # the workers' attempt records are read at most this often
CHAOS_LOCK_EXPIRY_S = 12.0  # so a worker cut off from Bigtable costs seconds, not minutes
# A hung pod (pod_hung) is replaced after this long without progress, not the half hour of
# production: above the lock expiry, so a pod waiting out a held claim is not taken for hung.
CHAOS_HUNG_FLOOR_S = 20.0
OPERATOR = "chaos-operator"
FAILURE_ALERTS = ("layer_failed", "failed_indexes", "layer_incomplete")


def chaos_config(cfg: PipelineConfig) -> PipelineConfig:
    """The demo config with a short lock expiry and hung-pod floor (for the baseline run
    too: same config)."""
    job = cfg.job.model_copy(
        update={"lock_expiry_s": min(cfg.job.lock_expiry_s, CHAOS_LOCK_EXPIRY_S)}
    )
    floor = min(cfg.controller.hung_floor_s, CHAOS_HUNG_FLOOR_S)
    controller = cfg.controller.model_copy(update={"hung_floor_s": floor})
    return cfg.model_copy(update={"job": job, "controller": controller})


@dataclass
class ChaosSession:
    """The faults of one chaos run, and what it found. See the module docstring."""

    faults: list[cp.Fault]
    root: Path
    expected_wall_s: float | None = None  # the baseline the offsets were planned over
    injector: ChaosInjector | None = None
    store: Any = None  # the run store and services of the stack (set by begin)
    services: Any = None
    cfg: PipelineConfig | None = None  # for the probe of held attempts' rows
    graph: Any = None  # the graph table's client (set by begin)
    resubmits: list[str] = field(default_factory=list)
    chunks_lost: int = 0
    lost_detail: dict[str, int] = field(default_factory=dict)
    unmarked_detail: dict[str, int] = field(default_factory=dict)  # ledger: no done marker
    unsafe: int = 0
    unsafe_chunks: tuple[str, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)
    redone: int = 0
    struck: StruckOutcomes = field(default_factory=StruckOutcomes)  # the pod faults' ends
    zombie_takeovers_refused: int = 0  # a zombie's claim refused: the holder was live
    zombie_takeovers_of_live_claims: int = 0  # must stay 0 (docs/zombies.md)
    hung_pods_replaced: int = 0  # pods the controller deleted as hung (the layers' pods_hung)
    audit_basis: dict[str, str] = field(default_factory=dict)
    _saved_env: str | None = None
    _resubmitted_at: dict[str, datetime] = field(default_factory=dict)
    _totals: dict[str, int] = field(default_factory=dict)  # layer key -> its chunks
    _progress: float = 0.0  # the build's share of chunks begun at the last observe
    _observed_at: float = float("-inf")  # monotonic time of the last observe

    def begin(self, stack: Any, store: Any, services: Any, graph: Any = None) -> None:
        """The stack is up: point the workers at the mailbox and start injecting."""
        self._saved_env = os.environ.get(mb.CHAOS_DIR_ENV)
        os.environ[mb.CHAOS_DIR_ENV] = str(mb.mailbox(self.root))  # pods inherit os.environ
        self.graph = graph
        self.injector = ChaosInjector(
            self.faults,
            self.root,
            stack.kube,
            probe=self._rows_of,
            progress=lambda: self._progress,
            expected_wall_s=self.expected_wall_s,
            write_gate=stack.write_gate,
        )
        stack.dispatcher.fault_hook = self.injector.pubsub
        self.store, self.services = store, services
        self.injector.start()

    def end(self) -> None:
        """Stop injecting (idempotent); the workers still running hold no chunk for us."""
        if self.injector is not None:
            self.injector.stop()
        if self._saved_env is None:
            os.environ.pop(mb.CHAOS_DIR_ENV, None)
        else:
            os.environ[mb.CHAOS_DIR_ENV] = self._saved_env

    def observe(self, run: RunState) -> None:
        """The build's share of chunks begun, which paces the faults: from the workers'
        attempt records (distinct chunks with a `begun` record; a layer that succeeded counts
        whole). Chunks, not Job indexes: an index holds a batch of chunks, and all of a layer's
        indexes begin at once. Begun, not done: worker faults strike chunks as they begin."""
        if self.cfg is None or time.monotonic() - self._observed_at < OBSERVE_EVERY_S:
            return
        self._observed_at = time.monotonic()
        for ls in run.ordered_layers():
            if ls.key not in self._totals:
                self._totals[ls.key] = layer_spec(self.cfg, ls.stage, ls.layer).chunks
        begun: dict[str, set[int]] = {}
        for r in mb.audit_records(self.root):
            if r.get("event") == "begun":
                key = layer_key(str(r["stage"]), int(r["layer"]))
                begun.setdefault(key, set()).add(int(r["chunk_id"]))
        counts = {key: len(ids) for key, ids in begun.items()}
        for ls in run.ordered_layers():
            if ls.phase == Phase.SUCCEEDED or ls.done_before:
                counts[ls.key] = self._totals[ls.key]
        self._progress = cp.build_progress(counts, self._totals)

    def on_failed(self, run: RunState) -> bool:
        """A layer failed: once its alert is out, re-submit it as an operator would (the
        injected fatal chunk is fixed: it fires once). False if no layer failed (the run
        failed for another reason: the demo stops)."""
        failed = [ls for ls in run.ordered_layers() if ls.phase == Phase.FAILED]
        if not failed:
            return False
        alerts = self.store.all_alerts(run.run_id)
        for ls in failed:
            since = self._resubmitted_at.get(ls.key)
            alerted = any(
                a.kind in FAILURE_ALERTS
                and a.sent
                and a.body.get("stage") == ls.stage
                and int(a.body.get("layer", 0)) == ls.layer
                and (since is None or a.created_at > since)
                for a in alerts
            )
            if not alerted:
                continue  # the operator acts on the alert: none yet for this failure
            log.warning("chaos operator: re-submitting %s after its alert", ls.key)
            self.store.update_run(
                run.run_id,
                lambda r, s=ls.stage, n=ls.layer: ops.resubmit(r, s, n, OPERATOR, _now()),
            )
            self._resubmitted_at[ls.key] = _now()
            self.services.kick(run.run_id, "submit", OPERATOR)
            self.resubmits.append(ls.key)
        return True

    def _rows_of(self, held: dict[str, Any]) -> list[int]:
        """The node ids a held ingest attempt's chunk holds now (other stages: none read)."""
        if held.get("stage") != "ingest" or self.graph is None or self.cfg is None:
            return []
        bits = self.cfg.ds.graph_config.SPATIAL_BITS
        seg = segment_bits(_root_layer(self.cfg), int(held["layer"]), bits)
        return [int(n.node_id) for n in read_chunk_nodes(self.graph, int(held["chunk_id"]), seg)]

    def finish(self, cfg: PipelineConfig, run: RunState, graph_client: Any) -> None:
        """The verdict, read while the emulators still serve."""
        self.end()
        done_cells: dict[tuple[str, int], int] = {}
        done_by: dict[tuple[str, int], int] = {}
        root, bits = _root_layer(cfg), cfg.ds.graph_config.SPATIAL_BITS
        self.hung_pods_replaced = sum(ls.faults.hung for ls in run.layers.values())
        for ls in run.ordered_layers():
            spec = layer_spec(cfg, ls.stage, ls.layer)
            ids = [
                chunk_id(ls.layer, c, root, bits)
                for i in range(spec.completions)
                for c in spec.batch_chunks(i)
            ]
            unmarked = lost_chunks(ids, BigtableChunkLedger(graph_client, ls.stage).done_among(ids))
            if unmarked:
                self.unmarked_detail[ls.key] = len(unmarked)
            cells, tokens = _done_cells(graph_client, ls.stage, ids)
            done_cells.update(cells)
            done_by.update(tokens)
        records = mb.audit_records(self.root)
        claims = zombie_claims(records)
        self.zombie_takeovers_refused = claims.refused
        self.zombie_takeovers_of_live_claims = claims.live_taken
        verdict = audit_chunks(records, done_cells)
        self.redone = verdict.redone

        def name(stage: str, cid: int) -> str:
            layer, _, coord = chunk_coord(cid, root, bits)
            return f"{stage}:{layer}_{tuple(int(c) for c in coord)}"

        unsafe = {name(*_split(k)): why for k, why in verdict.reasons.items()}
        findings: list[ChunkFinding] = []
        final_ids: set[int] = set()
        for stage in run.stages:
            self.audit_basis[stage] = "ledger and attempt records"
        if "ingest" in run.stages:
            nodes = read_all_nodes(graph_client)
            final_ids = {int(n.node_id) for n in nodes}
            vol = load_volume(str(cfg.ds.data_source.watershed))
            chunk = tuple(int(c) for c in cfg.ds.graph_config.CHUNK_SIZE)
            findings = audit_ingest(vol, chunk, root, bits, nodes)  # type: ignore[arg-type]
            self.audit_basis["ingest"] = "graph table against the volume"
            for f in findings:
                key = f"ingest:{f.key}"
                if f.unsafe:
                    records_say = unsafe.get(key)
                    unsafe[key] = f.describe() + (f" ({records_say})" if records_say else "")
                elif f.lost:
                    key = layer_key("ingest", f.layer)
                    self.lost_detail[key] = self.lost_detail.get(key, 0) + 1
        for key, n in self.unmarked_detail.items():  # stages without a data audit
            if key.rsplit("-L", 1)[0] != "ingest":
                self.lost_detail[key] = n
        self.chunks_lost = sum(self.lost_detail.values())
        self.unsafe = len(unsafe)
        self.unsafe_chunks = tuple(sorted(unsafe)[:20])
        self.reasons = {k: unsafe[k] for k in self.unsafe_chunks}
        self._count_struck(findings, final_ids, records, done_by)

    def _count_struck(
        self,
        findings: list[ChunkFinding],
        final_ids: set[int],
        records: list[dict[str, Any]],
        done_by: dict[tuple[str, int], int],
    ) -> None:
        """What became of the attempts pod faults struck (`struck_outcomes`)."""
        struck = self.injector.struck if self.injector is not None else []
        root = _root_layer(self.cfg) if self.cfg is not None else 0
        bits = self.cfg.ds.graph_config.SPATIAL_BITS if self.cfg is not None else 10
        bad = {("ingest", chunk_id(f.layer, f.coord, root, bits)) for f in findings}
        resumed = {
            (r["token"], int(r["chunk_id"])) for r in records if r["event"] == "zombie_resumed"
        }
        self.struck = struck_outcomes(struck, final_ids, bad, done_by, resumed)
        for left in self.struck.left_detail:
            log.warning("chaos: a partial write left: %s", left)

    def summary_fields(self, wall_s: float, baseline_wall_s: float) -> dict[str, Any]:
        """What `--json` adds in a chaos run."""
        injected = self.injector.counts() if self.injector is not None else {}
        planned = cp.planned_by_kind(self.faults)
        missing = {k: n - injected.get(k, 0) for k, n in planned.items()}
        return {
            "faults": injected,
            "faults_planned": planned,
            # due after the run ended, or with nothing to act on by then
            "faults_not_injected": {k: n for k, n in sorted(missing.items()) if n > 0},
            "chunks_lost": self.chunks_lost,
            "chunks_lost_by_layer": self.lost_detail,
            "chunks_unmarked_by_layer": self.unmarked_detail,
            "chunks_processed_twice_where_unsafe": self.unsafe,
            "unsafe_chunks": list(self.unsafe_chunks),
            "unsafe_reasons": self.reasons,
            "chunks_redone_safely": self.redone,
            "partial_writes_recovered": self.struck.partial_writes_recovered,
            "partial_writes_left": self.struck.partial_writes_left,
            "partial_writes_left_detail": self.struck.left_detail,
            "struck_attempts_finished": self.struck.struck_attempts_finished,
            "zombies": self.struck.zombies,
            "zombie_writes_fenced": self.struck.zombie_writes_fenced,
            "zombie_chunks_finished": self.struck.zombie_chunks_finished,
            "zombie_takeovers_refused": self.zombie_takeovers_refused,
            "zombie_takeovers_of_live_claims": self.zombie_takeovers_of_live_claims,
            "hung_pods_replaced": self.hung_pods_replaced,
            "audit_basis": self.audit_basis,
            "operator_resubmits": self.resubmits,
            "baseline_wall_s": round(baseline_wall_s, 2),
            "extra_wall_s": round(wall_s - baseline_wall_s, 2),
        }


def _root_layer(cfg: PipelineConfig) -> int:
    from shared.model.layers import layer_count

    return layer_count(cfg.layer2_shape())


def _split(key: str) -> tuple[str, int]:
    stage, cid = key.rsplit(":", 1)
    return stage, int(cid)


def _done_cells(
    client: Any, stage: str, ids: list[int]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Done cells (every version kept) per chunk: two mean two done writes; and the token
    of the attempt that wrote the newest."""
    out: dict[tuple[str, int], int] = {}
    by: dict[tuple[str, int], int] = {}
    keys = sorted({chunk_row_key(c, stage) for c in ids})
    for start in range(0, len(keys), 5000):
        query = ReadRowsQuery(
            row_keys=keys[start : start + 5000], row_filter=column_filter(CHUNK_DONE)
        )
        for row in client._table.read_rows(query):
            key = (stage, chunk_id_from_row_key(row.row_key))
            out[key] = len(row.cells)
            if row.cells:
                by[key] = int(CHUNK_DONE.deserialize(row.cells[0].value))
    return out, by


def _now() -> datetime:
    return datetime.now(UTC)


class ChaosBaselineError(RuntimeError):
    """The fault-free run the chaos run is measured against did not succeed."""


def run_chaos_demo(
    cfg: PipelineConfig,
    workdir: Path,
    *,
    n: int,
    seed: int,
    kinds: tuple[str, ...],
    baseline_wall_s: float | None,
    **demo_args: Any,
) -> Any:
    """A fault-free run (unless `baseline_wall_s` is given), then the same build with `n`
    faults spread over the baseline's duration; the chaos run's DemoResult, its `extra`
    holding the verdict and `ok` requiring no chunk lost and no unsafe double."""
    from scripts.demo_run import prepare_config, run_demo

    cfg = chaos_config(cfg)
    if baseline_wall_s is None:
        base_dir = workdir / "baseline"
        base = run_demo(prepare_config(cfg, base_dir, None, None), base_dir, **demo_args)
        if not base.ok:
            raise ChaosBaselineError(
                f"the fault-free baseline run failed (status {base.run.status}, oracle "
                f"{base.oracle['mismatches'][:3]}); fix that before measuring chaos"
            )
        baseline_wall_s = base.wall_s
    faults = cp.plan_faults(n, seed, baseline_wall_s, kinds)
    chaos_dir = workdir / "chaos"
    chaos_cfg = prepare_config(cfg, chaos_dir, None, None)
    session = ChaosSession(
        faults, chaos_dir / "mailbox", expected_wall_s=baseline_wall_s, cfg=chaos_cfg
    )
    result = run_demo(chaos_cfg, chaos_dir, chaos=session, **demo_args)
    result.extra = session.summary_fields(result.wall_s, baseline_wall_s)
    result.ok = (
        result.ok
        and session.chunks_lost == 0
        and session.unsafe == 0
        and not session.unmarked_detail
        and session.struck.partial_writes_left == 0
        and session.zombie_takeovers_of_live_claims == 0
    )
    return result
