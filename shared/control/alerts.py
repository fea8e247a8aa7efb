"""Alert bodies for the `alerts` topic: JSON objects, published with a `kind` attribute.

Every body has `kind`, `run_id`, `graph_id`, `stage`, `layer` (empty/0 for run-wide alerts)
and `at` (ISO time of the decision), plus the kind's details:

- `approval_needed`: `advance`, `forecast`, and `canary` when the layer's canary ran (its
  figures, sized requests and the build's forecast: shared.reconcile.canary)
- `canary_failed`: `reason`, `fix` (no canary pod succeeded; the layer goes on as configured)
- `failed_indexes`: `indexes` (an interval string, e.g. "3,7-9"), `index_count`, `job`,
  `batches` [{`index`, `chunks`, `log_tail`, and how its attempts failed: `failure`,
  `attempts`, `exit_codes`, `error` (shared.control.batch_failures)}] for the first
  MAX_BATCHES of them, `same_every_attempt_indexes` (bad input where a stage never exits 42),
  `batches_omitted`, and `detail` (the `pipeline inspect` command that shows them all)
- `layer_failed`: `reason`, and `failed_indexes` (the Job failed) or `fix` (it was refused)
- `setup_failed` (layer 0: a stage's setup pass): `reason`, `job`, `fix`, and `log_tail` (the
  setup pod's, filled when published like a batch's)
- `layer_stalled`: `no_progress_s`
- `pod_hung` (once per pod): `job`, `pod`, `index`, `chunks` (its batch), `no_progress_s`,
  `hung_after_s`, `last_progress`, `log_tail` (read before the pod was deleted), `detail`
- `oom_killed` (once per layer attempt): `pods`, `container_oom_kills`, `node_oom_kills`,
  `memory_request_gib`, `peak_memory_gib` (null: not measured), `processes`,
  `processes_per_vcpu`, `levers`, `fix` (shared.reconcile.oom_advice)
- `root_check_failed`: `job`, `check`, `chunks_marked`, `failed_indexes`, `reason`, `fix`
  (shared.reconcile.root_check)
- `budget_reached`: `spend_usd`, `budget_usd`
- `run_finished`: `status`, `verify` (per stage: `checked`, `chunks_marked`,
  `chunks_expected`, and `layers_unchecked` or `why` not; shared.reconcile.completeness)
- `layer_incomplete`: the layer's Job completed with chunks not marked done in the ledger (the
  layer is failed): `chunks_expected`, `chunks_marked`, `chunks_missing`, `missing_positions`
  (flat grid positions, bounded), `missing_examples` [{`position`, `coord`, `chunk_id`}],
  `reason`, `fix` (docs/verify.md)
- `run_unhealthy`: `error`, `failures` (consecutive failed reconciles), `since`
- `index_evicted_repeatedly` (once per index of a layer attempt): `indexes` (interval
  string), `index_count`, `evictions` {index: count}, `max_evictions_per_index`, `job`,
  `memory_request_gib`, `fix`, `batches` [{`index`, `evictions`, `chunks`}] for the first
  MAX_BATCHES (shared.reconcile.evictions)
- `claim_lost`: `job`, `chunk_count`, `chunks` (chunk ids, the first MAX_CLAIM_LOST_CHUNKS),
  `pods` [{`pod`, `index`, `chunks`}] (the first MAX_BATCHES): workers whose chunk claim was
  lost or could not be renewed (the fencing path: nothing marked done, the chunk redone).
  Committed as a check (`candidates`: the pods newly failed transient) and completed from
  their logs when published; a check whose pods logged no lost claim is dropped unsent
- `cave_registration_failed` (run-wide, committed by `pipeline start`:
  shared.operate.cave_registration): `reason`, `url`, `fix` (the command that registers by hand)

A batch's chunks are computed here (`shared.jobs.layer_spec`); its `log_tail` is empty in the
committed body and filled by the controller when it publishes, best effort (the last
LOG_TAIL_BYTES of it). Every body is `bounded` to MAX_BODY_BYTES of JSON, whatever the
failure's size: a mass failure is summarised, never a Firestore write that cannot succeed.
Pure module.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from shared.config.config import PipelineConfig
from shared.control.batch_failures import BatchFailure, BatchVerdict
from shared.forecast.forecast import forecast, forecast_inputs
from shared.jobs.layer_spec import layer_spec
from shared.model import intervals
from shared.model.state import RunState, layer_key
from shared.reconcile.completeness import run_verdict
from shared.reconcile.decision import Alert, LayerPlan
from shared.reconcile.evictions import ALERT_KIND as EVICTED_REPEATEDLY

LOG_TAIL_LINES = 30  # lines of a failed pod's log an alert carries
LOG_TAIL_BYTES = 4096  # ... of which at most the last 4 KiB
MAX_BATCHES = 20  # failed batches detailed (chunks, log tail) in one alert
MAX_BODY_BYTES = 64 * 1024  # of an alert body as JSON (Pub/Sub, Firestore, mail all bear it)
MAX_TEXT_CHARS = 4096  # of any other text field (a reason, an error)
MAX_CLAIM_LOST_CHUNKS = 200  # chunk ids one claim_lost alert lists
CLAIM_LOST_EVENT = "claim_lost"  # the `event` of a worker's record (worker.lock_keeper)
SUMMARIES = ("indexes", "failed_indexes")  # interval strings: cut last, and only if need be


def alert_body(
    cfg: PipelineConfig,
    run: RunState,
    alert: Alert,
    now: datetime,
    plans: dict[str, LayerPlan] | None = None,
) -> dict[str, Any]:
    """The body of one alert of `run` (its config `cfg`), decided at `now`; `plans`: the
    run's layer plans as the reconcile built them (None: built here when needed)."""
    body: dict[str, Any] = {
        "kind": alert.kind,
        "run_id": run.run_id,
        "graph_id": run.graph_id,
        "stage": alert.stage,
        "layer": alert.layer,
        "at": now.isoformat(),
        **alert.details,
    }
    if alert.kind == "failed_indexes":
        spec = layer_spec(cfg, alert.stage, alert.layer)
        indexes = sorted(alert.details["indexes"])
        body["indexes"] = intervals.format(indexes)
        body["index_count"] = len(indexes)
        body["batches"] = [
            {"index": i, "chunks": [list(c) for c in spec.batch_chunks(i)], "log_tail": ""}
            for i in indexes[:MAX_BATCHES]
        ]
        body["batches_omitted"] = max(0, len(indexes) - MAX_BATCHES)
        body["detail"] = f"pipeline inspect {run.run_id} {alert.stage} {alert.layer}"
    if alert.kind == EVICTED_REPEATEDLY:
        spec = layer_spec(cfg, alert.stage, alert.layer)
        indexes = sorted(alert.details["indexes"])
        counts = alert.details.get("evictions") or {}
        body["indexes"] = intervals.format(indexes)
        body["index_count"] = len(indexes)
        body["batches"] = [
            {
                "index": i,
                "evictions": counts.get(str(i), 0),
                "chunks": [list(c) for c in spec.batch_chunks(i)],
            }
            for i in indexes[:MAX_BATCHES]
        ]
        body["batches_omitted"] = max(0, len(indexes) - MAX_BATCHES)
    if alert.kind == "pod_hung":
        spec = layer_spec(cfg, alert.stage, alert.layer)
        body["chunks"] = [list(c) for c in spec.batch_chunks(int(alert.details["index"]))]
        body["detail"] = f"pipeline inspect {run.run_id} {alert.stage} {alert.layer}"
    if alert.kind == "approval_needed":
        body["forecast"] = approval_forecast(cfg, run, alert, now, plans)
    if alert.kind == "run_finished":
        body["verify"] = run_verdict(cfg, run)
    return bounded(body)


def approval_forecast(
    cfg: PipelineConfig,
    run: RunState,
    alert: Alert,
    now: datetime,
    plans: dict[str, LayerPlan] | None = None,
) -> dict[str, float]:
    """What the layer awaiting approval will take (the simulator's model, from the runtimes
    seen so far): its duration and cost, and the rest of the run's, so an operator approves
    knowing what it commits to. `plans`: the reconcile's layer plans (None: built here)."""
    fc = forecast(run, *forecast_inputs(cfg, run, plans), now)
    key = layer_key(alert.stage, alert.layer)
    layer = next((lf for lf in fc.layers if lf.key == key), None)
    return {
        "layer_duration_s": round(layer.remaining_s, 1) if layer else 0.0,
        "layer_cost_usd": round(layer.projected_usd, 6) if layer else 0.0,
        "run_remaining_s": round(fc.remaining_s, 1),
        "run_projected_usd": round(fc.projected_usd, 6),
    }


def tail_requests(body: dict[str, Any]) -> list[tuple[str, int]]:
    """(Job name, index) of each batch whose log tail the published alert should carry."""
    if body.get("kind") == "setup_failed" and body.get("job"):
        return [(body["job"], 0)]  # the setup pod's own log
    if body.get("kind") != "failed_indexes":
        return []
    return [(body["job"], int(b["index"])) for b in body.get("batches", [])]


def with_log_tails(body: dict[str, Any], tails: dict[int, str]) -> dict[str, Any]:
    """A copy of `body` whose batches (or, for a setup, itself) carry the fetched log tails
    (by index)."""
    if "batches" not in body:
        return bounded({**body, "log_tail": tails.get(0, "")[-LOG_TAIL_BYTES:]})
    batches = [
        {**b, "log_tail": tails.get(int(b["index"]), "")[-LOG_TAIL_BYTES:]} for b in body["batches"]
    ]
    return bounded({**body, "batches": batches})


def with_batch_verdicts(body: dict[str, Any], verdicts: dict[int, BatchVerdict]) -> dict[str, Any]:
    """A copy of a `failed_indexes` body whose batches carry how their attempts failed
    (`failure`, `attempts`, `exit_codes`, `error`; shared.control.batch_failures), and the
    indexes that failed the same way on every attempt (`same_every_attempt_indexes`): the
    sign of bad input in a stage that never exits 42."""
    batches = []
    for b in body.get("batches", []):
        verdict = verdicts.get(int(b["index"]))
        if verdict is None:
            batches.append(b)
            continue
        batches.append(
            {
                **b,
                "failure": verdict.failure.value,
                "attempts": verdict.attempts,
                "exit_codes": list(verdict.exit_codes),
                "error": verdict.error,
            }
        )
    same = sorted(i for i, v in verdicts.items() if v.failure is BatchFailure.SAME_EVERY_ATTEMPT)
    return bounded({**body, "batches": batches, "same_every_attempt_indexes": same})


def body_size(body: dict[str, Any]) -> int:
    """Bytes of `body` as published (compact JSON, UTF-8)."""
    return len(json.dumps(body, default=str, separators=(",", ":")).encode())


def bounded(body: dict[str, Any], limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """`body` within `limit` bytes of JSON: long text fields cut, then batches' chunk lists
    replaced by their count (from the last batch back), then the log tails shared out, then
    batches dropped (counted in `batches_omitted`). The index summary and the `detail`
    command always stay."""
    out = {k: _cut(v) if isinstance(v, str) and k not in SUMMARIES else v for k, v in body.items()}
    if body_size(out) <= limit:
        return out
    batches = [dict(b) for b in out.get("batches") or []]
    base = body_size({**out, "batches": [], "batches_omitted": 10**9})
    sizes = [body_size(b) + 1 for b in batches]  # each with its comma
    # Chunk lists first (the layer spec recomputes them), from the last batch back.
    for i in reversed(range(len(batches))):
        if base + sum(sizes) <= limit:
            break
        batches[i]["chunk_count"] = len(batches[i].pop("chunks", []))
        sizes[i] = body_size(batches[i]) + 1
    share = LOG_TAIL_BYTES
    while batches and share > 0 and base + sum(sizes) > limit:
        share //= 2
        for i, b in enumerate(batches):
            b["log_tail"] = b.get("log_tail", "")[-share:] if share else ""
            sizes[i] = body_size(b) + 1
    while batches and base + sum(sizes) > limit:
        batches.pop()
        sizes.pop()
        out["batches_omitted"] = int(out.get("batches_omitted", 0)) + 1
    if "batches" in out:
        out["batches"] = batches
    if body_size(out) > limit:  # the summary alone is too long: keep its head
        for key in SUMMARIES:
            if isinstance(out.get(key), str):
                out[key] = out[key][: limit // 4] + " ..."
    return out


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 4] + " ..."


def run_unhealthy_body(
    run_id: str, error: str, failures: int, since: datetime, now: datetime
) -> dict[str, Any]:
    """The alert for a run the controller has failed to reconcile `failures` times in a row
    (sent once per spell; the other runs go on). Its `alert_id` names the spell."""
    return {
        "kind": "run_unhealthy",
        "alert_id": f"run_unhealthy-{run_id}-{since.isoformat()}",
        "run_id": run_id,
        "graph_id": "",
        "stage": "",
        "layer": 0,
        "at": now.isoformat(),
        "error": error,
        "failures": failures,
        "since": since.isoformat(),
        "fix": f"see the error; fix the run's cause, or `pipeline pause {run_id}`",
    }


def claim_lost_chunks(log_text: str) -> list[int]:
    """Chunk ids of the `claim_lost` records in a worker's log (JSON lines; others skipped)."""
    chunks: list[int] = []
    for line in log_text.splitlines():
        if CLAIM_LOST_EVENT not in line:
            continue
        try:
            record = json.loads(line)
            if record.get("event") == CLAIM_LOST_EVENT:
                chunks.append(int(record["chunk_id"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return sorted(set(chunks))


def claim_lost_body(
    run: RunState, stage: str, layer: int, job: str, pods: list[tuple[str, int, list[int]]],
    now: datetime,
) -> dict[str, Any]:  # fmt: skip
    """One alert for the pods of a layer (name, Job index, chunk ids) whose workers lost a
    chunk claim: sent once per set of pods (each pod is recorded once), bounded."""
    return _claim_lost(run.run_id, run.graph_id, stage, layer, job, pods, now.isoformat())


def _claim_lost(
    run_id: str, graph_id: str, stage: str, layer: int, job: str,
    pods: list[tuple[str, int, list[int]]], at: str,
) -> dict[str, Any]:  # fmt: skip
    chunks = sorted({c for _, _, ids in pods for c in ids})
    return bounded(
        {
            "kind": CLAIM_LOST_EVENT,
            "run_id": run_id,
            "graph_id": graph_id,
            "stage": stage,
            "layer": layer,
            "at": at,
            "job": job,
            "chunk_count": len(chunks),
            "chunks": chunks[:MAX_CLAIM_LOST_CHUNKS],
            "pods": [
                {"pod": name, "index": index, "chunks": ids[:MAX_CLAIM_LOST_CHUNKS]}
                for name, index, ids in pods[:MAX_BATCHES]
            ],
            "pods_omitted": max(0, len(pods) - MAX_BATCHES),
            "detail": f"pipeline inspect {run_id} {stage} {layer}",
        }
    )


def claim_lost_check(
    run: RunState, stage: str, layer: int, job: str, candidates: list[tuple[str, int]],
    now: datetime,
) -> dict[str, Any]:  # fmt: skip
    """The outbox entry committed for a layer's pods newly recorded as failed transient
    (name, Job index): whether their workers lost a chunk claim is read from their logs when
    the entry is published (`claim_lost_logs`, `with_claim_lost`), not at commit, so the
    commit reads nothing. Each pod is recorded once, so each is checked once."""
    return {
        "kind": CLAIM_LOST_EVENT,
        "run_id": run.run_id,
        "graph_id": run.graph_id,
        "stage": stage,
        "layer": layer,
        "at": now.isoformat(),
        "job": job,
        "candidates": [{"pod": name, "index": index} for name, index in candidates],
    }


def claim_lost_logs(body: dict[str, Any]) -> list[str]:
    """The pods whose logs a `claim_lost_check` entry needs read before it is published;
    [] for any other body (a `claim_lost` alert committed complete by an older controller
    included)."""
    if body.get("kind") != CLAIM_LOST_EVENT:
        return []
    return [str(c["pod"]) for c in body.get("candidates") or []]


def with_claim_lost(body: dict[str, Any], logs: dict[str, str]) -> dict[str, Any] | None:
    """The `claim_lost` alert of a check entry given its pods' logs (by pod name; a pod
    missing: its log was unreadable), or None when no pod logged a lost claim (nothing to
    publish)."""
    pods = []
    for c in body.get("candidates") or []:
        chunks = claim_lost_chunks(logs.get(str(c["pod"]), ""))
        if chunks:
            pods.append((str(c["pod"]), int(c["index"]), chunks))
    if not pods:
        return None
    return _claim_lost(
        body["run_id"], body["graph_id"], body["stage"], body["layer"], body["job"], pods,
        body["at"],
    )  # fmt: skip
