"""The canary: a few scattered chunks of a stage's layer 2, built before the layer runs wide,
to size its pods and forecast the build (docs/canary-and-rightsize.md). Pure: no I/O.

**Which chunks, in the images' own terms.** The worker contract (and the predecessor's
harness in PyChunkedGraph images) gives pod `i` the window `batch_coords(i, grid, seed,
PCG_BATCH_SIZE)`: positions `[i*B, (i+1)*B)` of the layer's seeded permutation. A Job of the
layer's own manifest with `completions: ceil(N/2)` and `PCG_BATCH_SIZE=2` therefore builds
positions `0..N-1` (N rounded up to even), two chunks a pod, scattered over the grid by the
permutation. They are the first chunks of the full layer's first windows, so the full layer
finds their done markers and skips them. Nothing new is asked of an image. Two a pod, not
one: a pod's first chunk carries what the process pays once (imports, a first read), so
only a second chunk shows what a chunk costs in a running pod (`pod_summary`).

**What it gives.** From its succeeded pods: runtime p50 and p95, peak memory and CPU p95
(where the cluster measures them: shared.ports.cluster.PodInfo). The layer's requests are then
sized from them (`size_layer`: peak memory x `job.canary_margin`, CPU p95 x the same
margin, snapped to Autopilot) unless `job.resources.overrides[2]` pins them, and the whole
build is forecast by the simulator fed with these runtimes (shared.forecast.canary_forecast,
once the decision that ended the canary is made: the simulator drives the decision, so it sits
above it and is never called from it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from shared.config.config import JobOverride, JobSettings, LayerOverride, PipelineConfig
from shared.jobs.autopilot import Requests, ResourceLimitError, layer_requests, snap_requests
from shared.model.phase import Phase, canary_phase_to_doc
from shared.model.state import LayerState, RunState
from shared.model.worker_contract import BATCH_SIZE
from shared.ports.cluster import JobStatus, PodInfo
from shared.reconcile.rightsize import percentile

CANARY_LABEL = "cave-pipeline/canary"
BATCH_ANNOTATION = "cave-pipeline/batch-size"
# A pod's start-up as the forecasts assume it (shared.forecast.simulation.runtimes.Runtimes)
# when nothing measured it.
POD_START_UP_S = 10.0
# Chunks a canary pod builds: the first carries the pod's cold start, the second is timed.
CANARY_BATCH = 2


def canary_job_name(layer_job: str) -> str:
    """The canary Job of a layer's Job (Job names allow 63 characters; ours use about 30)."""
    return f"{layer_job}-canary"


def canary_size(requested: int, layer_chunks: int) -> int:
    """Chunks the canary builds: as asked, at most the layer's."""
    return max(1, min(requested, layer_chunks))


def canary_pods(chunks: int) -> int:
    """Pods (Job indexes) a canary of `chunks` chunks runs: CANARY_BATCH chunks each."""
    return max(1, -(-chunks // CANARY_BATCH))


def canary_manifest(manifest: dict[str, Any], name: str, chunks: int) -> dict[str, Any]:
    """The layer's rendered Job as its canary: `canary_pods(chunks)` indexes of CANARY_BATCH
    chunks each (`PCG_BATCH_SIZE`), under `name`, labelled as a canary. Everything else
    (image, env, seed, grid, mounts, requests) is the layer's, so the images run it as they
    run the layer."""
    out = copy.deepcopy(manifest)
    pods, batch = canary_pods(chunks), str(CANARY_BATCH)
    meta = out["metadata"]
    meta["name"] = name
    meta["labels"] = {**meta.get("labels", {}), CANARY_LABEL: "true"}
    meta["annotations"] = {**meta.get("annotations", {}), BATCH_ANNOTATION: batch}
    spec = out["spec"]
    spec["completions"] = pods
    if "maxFailedIndexes" in spec:
        spec["maxFailedIndexes"] = min(spec["maxFailedIndexes"], pods)
    template = spec["template"]
    pod_meta = template["metadata"]
    pod_meta["labels"] = {**pod_meta.get("labels", {}), CANARY_LABEL: "true"}
    pod_meta["annotations"] = {**pod_meta.get("annotations", {}), BATCH_ANNOTATION: batch}
    for container in template["spec"]["containers"]:
        for var in container.get("env", []):
            if var.get("name") == BATCH_SIZE:
                var["value"] = batch
    return out


SUMMARY_MARK = "batch summary"


@dataclass(frozen=True)
class PodTimes:
    """One pod's times as the worker's `batch summary` line reports them."""

    startup_s: float  # process start -> its batch begun
    chunk_compute_s: float  # all its chunks' compute
    processed: int = 1  # chunks it computed
    first_chunk_s: float | None = None  # the first of them (None: not reported)
    # Their whole spans (claim, compute, done marker), all and the first (None: a worker of
    # before reported compute only)
    chunk_span_s: float | None = None
    first_span_s: float | None = None
    # The batch's own time (its chunks begun to the summary) and when the summary was
    # written, to the millisecond (None: a worker of before, or a line without them)
    elapsed_s: float | None = None
    ended_at: datetime | None = None

    def overhead_s(self, warm_chunk_s: float) -> float | None:
        """What the pod paid beyond its chunks at `warm_chunk_s` each: the process's start
        (interpreter, imports, clients), the first chunk's cold part and the batch's own
        bookkeeping, from the worker's clock (None: `elapsed_s` not reported)."""
        if self.elapsed_s is None:
            return None
        return max(0.0, self.startup_s + self.elapsed_s - self.processed * warm_chunk_s)

    def warm_chunk_s(self) -> float | None:
        """One chunk's time in a running pod: the mean of the chunks after the first, their
        whole spans where reported (the ledger's round trips are a chunk's cost too), else
        their compute (None: fewer than two computed, or the first not reported)."""
        if self.processed < 2:
            return None
        if self.chunk_span_s is not None and self.first_span_s is not None:
            return max(0.0, self.chunk_span_s - self.first_span_s) / (self.processed - 1)
        if self.first_chunk_s is None:
            return None
        return max(0.0, self.chunk_compute_s - self.first_chunk_s) / (self.processed - 1)


def _seconds_or_none(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def pod_summary(log_tail: str) -> PodTimes | None:
    """A pod's times from the worker's last `batch summary` log line (our worker writes one
    per pod with `startup_s`, `chunk_compute_s`, `processed` and `first_chunk_s`); None
    when the log has none (PyChunkedGraph images' harness logs no timings)."""
    for line in reversed(log_tail.splitlines()):
        if SUMMARY_MARK not in line or "{" not in line:
            continue
        try:
            doc = json.loads(line[line.index("{") :])
            return PodTimes(
                float(doc["startup_s"]),
                float(doc["chunk_compute_s"]),
                int(doc.get("processed", 1)),
                _seconds_or_none(doc.get("first_chunk_s")),
                _seconds_or_none(doc.get("chunk_span_s")),
                _seconds_or_none(doc.get("first_span_s")),
                _seconds_or_none(doc.get("elapsed_s")),
                _precise_time(doc.get("time")),
            )
        except (ValueError, KeyError, TypeError):
            return None
    return None


def _precise_time(value: object) -> datetime | None:
    """A log line's `time` if it has a fraction of a second (the worker's since it writes
    milliseconds; an older line's whole second says no more than the pod's own end)."""
    if not isinstance(value, str) or "." not in value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class CanaryFigures:
    """What the canary's succeeded pods showed."""

    chunks: int  # chunks its succeeded pods built (CANARY_BATCH a pod unless logged)
    runtime_p50_s: float
    runtime_p95_s: float
    start_p50_s: float  # created -> started: a pod's wait for a node
    start_max_s: float
    peak_memory_gib: float | None  # None: the cluster does not measure it
    cpu_p95: float | None
    pod_seconds: float  # of every attempt (what was billed)
    # From the pods' logs where the worker reports them (pod_summary): a pod's start-up
    # (process start to its first chunk) and one chunk's compute time in a running pod (the
    # chunks after a pod's first; a pod of one chunk: that chunk). None: not reported.
    startup_p50_s: float | None = None
    chunk_p50_s: float | None = None
    chunk_p95_s: float | None = None
    # What a pod pays once, whatever its batch: its runtime less its chunks at the warm
    # chunk time (process start, imports, the first chunk's cold part, exit). None: no pod
    # reported a warm chunk.
    pod_overhead_p50_s: float | None = None
    pods: int = 0  # pods that succeeded
    # created -> started, the mean: pod times are whole seconds, so the median of a few
    # pods is 0 or 1 s where the mean is not (None: a record of before)
    start_mean_s: float | None = None
    # Its last pod's end -> the reconcile that saw its Job done (the Job controller's status
    # update, the trigger's delay): set by that reconcile (canary_holds). None: not yet.
    completion_s: float | None = None


def canary_figures(
    pods: Sequence[PodInfo], logs: Mapping[str, str] | None = None
) -> CanaryFigures | None:
    """The figures of a finished canary's pods (`logs`: their log tails by pod name); None if
    none succeeded."""
    done = [p for p in pods if p.phase == "Succeeded" and p.started and p.finished]
    if not done:
        return None
    runtimes = [(p.finished - p.started).total_seconds() for p in done]  # type: ignore[operator]
    starts = [(p.started - p.created).total_seconds() for p in done if p.created]  # type: ignore[operator]
    mems = [p.peak_memory_gib for p in done if p.peak_memory_gib is not None]
    cpus = [p.cpu_used for p in done if p.cpu_used is not None]
    billed = sum((p.finished - p.started).total_seconds() for p in pods if p.started and p.finished)
    logged = [pod_summary((logs or {}).get(p.name, "")) for p in done]
    return CanaryFigures(
        chunks=sum(CANARY_BATCH if t is None else t.processed for t in logged),
        runtime_p50_s=percentile(runtimes, 50),
        runtime_p95_s=percentile(runtimes, 95),
        start_p50_s=percentile(starts, 50) if starts else 0.0,
        start_max_s=max(starts, default=0.0),
        peak_memory_gib=max(mems) if mems else None,
        cpu_p95=percentile(cpus, 95) if cpus else None,
        pod_seconds=billed,
        **_pod_times(done, logs or {}),
        pods=len(done),
        start_mean_s=sum(starts) / len(starts) if starts else None,
    )


def _pod_times(done: Sequence[PodInfo], logs: Mapping[str, str]) -> dict[str, float]:
    """The timed figures of CanaryFigures from the succeeded pods' summary lines."""
    found = [(p, t) for p in done if (t := pod_summary(logs.get(p.name, ""))) is not None]
    if not found:
        return {}
    warm = [(p, w, t) for p, t in found if (w := t.warm_chunk_s()) is not None]
    if warm:
        chunks = [w for _, w, _ in warm]
        # The worker's own clock where it reports its batch's time; else the pod's runtime,
        # whose whole seconds (Kubernetes' resolution) swamp a short pod's start-up.
        overheads = [
            own
            if (own := t.overhead_s(w)) is not None
            else max(0.0, (p.finished - p.started).total_seconds() - t.processed * w)  # type: ignore[operator]
            for p, w, t in warm
        ]
    else:  # pods of one chunk (or an older worker): a chunk is the pod's compute
        chunks = [t.chunk_compute_s / max(1, t.processed) for _, t in found]
        overheads = []
    out = {
        "startup_p50_s": percentile([t.startup_s for _, t in found], 50),
        "chunk_p50_s": percentile(chunks, 50),
        "chunk_p95_s": percentile(chunks, 95),
    }
    if overheads:
        out["pod_overhead_p50_s"] = percentile(overheads, 50)
    return out


def pods_ended(pods: Sequence[PodInfo], logs: Mapping[str, str]) -> list[datetime]:
    """When each finished pod ended: its summary line's time where the worker wrote one to
    the millisecond, else Kubernetes' finish time, which is cut to the whole second (so a
    canary's last pod -> the reconcile seeing its Job done read up to a second long)."""
    out = []
    for p in pods:
        if p.finished is None:
            continue
        summary = pod_summary(logs.get(p.name, ""))
        at = summary.ended_at if summary is not None else None
        out.append(max(p.finished, at) if at is not None else p.finished)
    return out


def size_layer(figures: CanaryFigures, job: JobSettings, layer: int, margin: float) -> Requests:
    """The layer's requests from its canary: peak memory and CPU p95 times `margin`, each
    kept at the configured value where the canary did not measure it or
    `job.resources.overrides[layer]` pins it; snapped to Autopilot (ResourceLimitError past
    the class's ceiling)."""
    configured = layer_requests(job, layer)
    pin = job.resources.overrides.get(layer) or LayerOverride()
    cpu, memory = configured.cpu, configured.memory_gib
    if pin.cpu is None and figures.cpu_p95 is not None:
        cpu = max(figures.cpu_p95, 0.001) * margin
    if pin.memory is None and figures.peak_memory_gib is not None:
        memory = figures.peak_memory_gib * margin
    return snap_requests(cpu, memory, job.compute_class)


@dataclass(frozen=True)
class CanaryPlan:
    """What the config says about a layer's canary: its Job (name, manifest or refusal), its
    chunks, and the margin and settings it sizes the layer with."""

    job_name: str
    chunks: int
    margin: float
    job: JobSettings
    manifest: dict[str, Any] | None = field(default=None, compare=False)
    refusal: str = ""


def canary_holds(
    ls: LayerState,
    plan: CanaryPlan | None,
    job: JobStatus | None,
    pods: Sequence[PodInfo],
    planned: Requests,
    now: datetime,
    logs: Mapping[str, str] | None = None,
    parallelism: int | None = None,
) -> tuple[bool, list[tuple[str, Any]]]:
    """One reconcile of a layer that may start: whether its canary still holds it back, and
    what to do: ("create", (job name, parallelism)) or ("alert", (kind, details)).

    A canary is created once the layer may start (before its approval); while it runs the
    layer waits. When it ends the layer keeps its figures and sized requests in
    `ls.canary.record` (the build's forecast from them is added to it after the decision:
    shared.forecast.canary_forecast.with_canary_forecasts); the layer then waits one more
    reconcile if the size changed (the next one plans its Job at the new size), else goes on.
    A canary with no succeeded pod is recorded as failed and alerted; the layer goes on as
    configured. `parallelism`: the pods the new canary Job may run at once
    (controller.max_vcpus; default all its chunks)."""
    if parallelism is None and plan is not None:
        parallelism = canary_pods(plan.chunks)
    if plan is None or ls.canary.phase in (Phase.SUCCEEDED, Phase.FAILED):
        return False, []
    if ls.canary.phase == Phase.WAITING:
        ls.canary.phase, ls.canary.job = Phase.RUNNING, plan.job_name
        # Its pods' vCPU, counted against controller.max_vcpus while it runs (canary_vcpus).
        ls.canary.record = {
            "chunks": plan.chunks,
            "parallelism": parallelism,
            "cpu": planned.cpu,
            "started_at": now.isoformat(),
        }
        return True, [("create", (plan.job_name, parallelism))]
    if job is None:  # committed but not created (a crash in between): the name is idempotent
        held = ls.canary.record.get("parallelism", canary_pods(plan.chunks))
        return True, [("create", (ls.canary.job, held))]
    if not job.finished:
        return True, []
    figures = canary_figures(pods, logs)
    # Its pods are billed to the layer, as its own pods are.
    for p in pods:
        if p.started and p.finished:
            seconds = (p.finished - p.started).total_seconds()
            ls.pods.cpu_seconds += p.cpu_request * seconds
            ls.pods.memory_gib_seconds += p.memory_request_gib * seconds
    if figures is None:
        ls.canary.phase = Phase.FAILED
        reason = job.reason or "no canary pod succeeded"
        ls.canary.record = {**ls.canary.record, "failed": reason}
        fix = f"see `pipeline inspect` of Job {ls.canary.job}; the layer goes on as configured"
        return False, [("alert", ("canary_failed", {"reason": reason, "fix": fix}))]
    ended = pods_ended(pods, logs or {})
    if ended:  # its last pod's end -> this reconcile: the Job's completion, as a layer's
        figures = replace(figures, completion_s=max(0.0, (now - max(ended)).total_seconds()))
    problems = {}
    try:
        sized = size_layer(figures, plan.job, ls.layer, plan.margin)
    except ResourceLimitError as e:  # past the class's ceiling: keep the plan, say why
        sized, problems["size_error"] = planned, str(e)
    record: dict[str, Any] = {
        **ls.canary.record,
        **{k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(figures).items()},
        "planned": {"cpu": planned.cpu, "memory_gib": planned.memory_gib},
        "sized": {"cpu": sized.cpu, "memory_gib": sized.memory_gib},
        "finished_at": now.isoformat(),
    }
    record.update(problems)
    ls.canary.record, ls.canary.phase = record, Phase.SUCCEEDED
    return (sized.cpu, sized.memory_gib) != (planned.cpu, planned.memory_gib), []


def canary_vcpus(ls: LayerState) -> float:
    """The vCPUs a layer's running canary requests (its parallelism x its pods' vCPU),
    counted against controller.max_vcpus like a running layer's (shared.reconcile.vcpu_budget)."""
    if ls.canary.phase != Phase.RUNNING:
        return 0.0
    c = ls.canary.record
    return float(c.get("parallelism", c.get("chunks", 0))) * float(c.get("cpu", 0.0))


def canary_details(ls: LayerState) -> dict[str, Any]:
    """What a layer's `approval_needed` alert adds: its canary's record, if it ran."""
    return {"canary": ls.canary.record} if ls.canary.phase == Phase.SUCCEEDED else {}


def with_canary_sizes(cfg: PipelineConfig, run: RunState) -> PipelineConfig:
    """`cfg` with each layer's canary-sized requests as its per-layer override (the layers
    whose canary is done). Applied before the OOM bump (shared.reconcile.oom), which raises them."""
    sized = [
        ls
        for ls in run.layers.values()
        if ls.canary.phase == Phase.SUCCEEDED and "sized" in ls.canary.record
    ]
    if not sized:
        return cfg
    return with_layer_requests(
        cfg,
        {
            (ls.stage, ls.layer): (
                ls.canary.record["sized"]["cpu"],
                ls.canary.record["sized"]["memory_gib"],
            )
            for ls in sized
        },
    )


def with_layer_requests(
    cfg: PipelineConfig, requests: dict[tuple[str, int], tuple[float, float]]
) -> PipelineConfig:
    """`cfg` with per-layer overrides (stage, layer) -> (vCPU, GiB) in each stage's block."""
    workloads = dict(cfg.job.workloads)
    for stage in sorted({s for s, _ in requests}):
        job = cfg.job.for_stage(stage)
        overrides = dict(job.resources.overrides)
        for (s, layer), (cpu, memory) in requests.items():
            if s == stage:
                overrides[layer] = LayerOverride(cpu=cpu, memory=memory)
        resources = job.resources.model_copy(update={"overrides": overrides})
        current = workloads.get(stage)
        workloads[stage] = (current or JobOverride()).model_copy(update={"resources": resources})
    job_cfg = cfg.job.model_copy(update={"workloads": workloads})
    return cfg.model_copy(update={"job": job_cfg})


def canary_summary(run: RunState) -> list[dict[str, Any]]:
    """Each canary of the run as the demo's `--json` and the views show it: its figures and
    forecast, and what the run measured once it has ended (wall time from the run's start;
    cost: shared.money.costs, added by the caller that prices the run)."""
    out = []
    for ls in run.ordered_layers():
        if ls.canary.phase == Phase.WAITING:
            continue
        c, fc = ls.canary.record, ls.canary.record.get("forecast") or {}
        peak = c.get("peak_memory_gib")
        measured = None
        if run.finished_at and run.created_at:
            measured = round((run.finished_at - run.created_at).total_seconds(), 2)
        out.append(
            {
                "stage": ls.stage,
                "layer": ls.layer,
                "phase": canary_phase_to_doc(ls.canary.phase),  # as stored: "done", not succeeded
                "chunks": c.get("chunks"),
                "pods": c.get("pods", c.get("chunks")),  # records before two chunks a pod
                "runtime_p50_s": c.get("runtime_p50_s"),
                "runtime_p95_s": c.get("runtime_p95_s"),
                # what the forecasts were fed: a chunk in a running pod, a pod's start-up
                # and its wait for a place
                "chunk_p50_s": c.get("chunk_p50_s"),
                "pod_overhead_p50_s": c.get("pod_overhead_p50_s"),
                "start_p50_s": c.get("start_p50_s"),
                "start_mean_s": c.get("start_mean_s"),
                "completion_s": c.get("completion_s"),
                "peak_memory_mib": None if peak is None else round(peak * 1024, 1),
                "cpu_p95": c.get("cpu_p95"),
                "planned": c.get("planned"),
                "sized": c.get("sized"),
                "forecast_wall_s": fc.get("wall_s"),
                "forecast_pods": fc.get("pods"),
                "forecast_cost_usd": fc.get("cost_usd"),
                "measured_wall_s": measured,
                "failed": c.get("failed"),
            }
        )
    return out


def canary_chunk_s(run: RunState) -> float | None:
    """One chunk's time as the run's canaries measured it (the worker's warm chunk compute
    p50, else a canary pod's p50 runtime less the forecast's start-up share, over its
    chunks), for the in-run forecast before any pod of the run has finished; None without
    a finished canary."""
    times = []
    for ls in run.layers.values():
        c = ls.canary.record
        if ls.canary.phase != Phase.SUCCEEDED:
            continue
        if c.get("chunk_p50_s") is not None:
            times.append(float(c["chunk_p50_s"]))
        elif c.get("runtime_p50_s") is not None:
            pod = float(c["runtime_p50_s"])
            chunks = int(c.get("chunks") or 1)
            per_pod = max(1, chunks // max(1, int(c.get("pods") or chunks)))
            times.append((pod - min(POD_START_UP_S, pod / 2)) / per_pod)
    return max(times) if times else None


def _done_records(run: RunState) -> list[dict[str, Any]]:
    """The records of the run's canaries that ended with figures."""
    return [ls.canary.record for ls in run.layers.values() if ls.canary.phase == Phase.SUCCEEDED]


def canary_pod_overhead_s(run: RunState) -> float | None:
    """What a pod pays once (its start-up, the first chunk's cold part, its exit) as the
    run's canaries measured it (`pod_overhead_p50_s`; the largest over its canaries), for
    the in-run forecast; None without a finished canary that measured it."""
    times = [
        float(ls.canary.record["pod_overhead_p50_s"])
        for ls in run.layers.values()
        if ls.canary.phase == Phase.SUCCEEDED
        and ls.canary.record.get("pod_overhead_p50_s") is not None
    ]
    return max(times) if times else None


def canary_completion_s(run: RunState) -> float | None:
    """A Job's last pod done -> the controller seeing the Job done (the Job controller's
    status update, the watch), as the run's canaries measured it (`completion_s`); None
    without a finished canary that recorded it."""
    times = [
        float(c["completion_s"]) for c in _done_records(run) if c.get("completion_s") is not None
    ]
    return max(times) if times else None


def canary_pod_wait_s(run: RunState) -> float | None:
    """A pod's wait from its creation to its start (scheduling, the container's start) as
    the run's canaries measured it (`start_mean_s`, else `start_p50_s`); None without a
    finished canary."""
    times = []
    for ls in run.layers.values():
        c = ls.canary.record
        wait = c.get("start_mean_s", c.get("start_p50_s"))
        if ls.canary.phase == Phase.SUCCEEDED and wait is not None:
            times.append(float(wait))
    return max(times) if times else None
