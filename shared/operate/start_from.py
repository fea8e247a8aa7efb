"""`pipeline start --from-layer L [--stage S]` (or `start_layers` in the config): a run that
begins a stage mid-graph. The layers below L were built before (by an earlier run, or the
predecessor): they are recorded as done (`done_before`). A stage whose pods write done
markers (shared.model.stages.writes_done_markers) starts once every chunk of layer L-1 is found
marked done in the ledger; one whose pods write none (PyChunkedGraph's meshing and migration,
the L2 cache) starts as the predecessor started it, trusting L, and the run records who
started it when, unverified (docs/predecessor-configs.md). Pure module: the ledger read is
the caller's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from shared.config.config import PipelineConfig
from shared.jobs.layer_spec import layer_spec
from shared.model.layers import chunk_id
from shared.model.phase import Phase
from shared.model.stages import FIRST_LAYER, dependencies, dependencies_in, writes_done_markers
from shared.model.state import RunState, layer_key
from shared.operate.operator_actions import ActionError

SAMPLE = 5  # missing chunks named in a refusal
INGEST = "ingest"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class LayerNotDoneError(ActionError):
    """The layer below the start is not complete in the ledger."""


class RootCheckFailedError(ActionError):
    """A stage that builds on ingest would start on a graph whose root layer failed
    PyChunkedGraph's root check (its markers are complete, the graph's tests failed)."""


def builds_on_ingest_only(run: RunState) -> bool:
    """Whether `run` starts a stage that builds on ingest without building ingest itself
    (so the graph's earlier ingest runs vouch for the graph it starts on)."""
    return INGEST not in run.stages and any(INGEST in dependencies(s) for s in run.stages)


def check_root_check(run: RunState, earlier: Iterable[RunState], force: bool = False) -> None:
    """RootCheckFailedError when `run` starts a stage that builds on ingest without building
    ingest itself, and the graph's newest earlier run that finished ingest's root layer
    recorded its root check failing (shared.reconcile.root_check): complete done markers
    there are not a built graph. `earlier` must carry their layers. `force` starts anyway."""
    if force or not builds_on_ingest_only(run):
        return
    ended = [
        (r.created_at or EPOCH, r, ls)
        for r in earlier
        if r.run_id != run.run_id and INGEST in r.stages
        for ls in [r.layers.get(layer_key(INGEST, r.top_layers.get(INGEST, 0)))]
        if ls is not None and (ls.phase == Phase.SUCCEEDED or ls.root_check_failed)
    ]
    if not ended:
        return
    _, last, root = max(ended, key=lambda e: e[0])
    if not root.root_check_failed:
        return
    raise RootCheckFailedError(
        f"cannot start {', '.join(run.stages)}: ingest's root layer {root.layer} of run "
        f"{last.run_id} failed the root check (its chunk is marked done, but PyChunkedGraph's "
        f"graph tests failed after it): the graph is not complete. Re-run the check with "
        f"`pipeline submit {last.run_id} ingest {root.layer}` (the done chunk is skipped), or "
        "start with --force"
    )


def start_layers(
    cfg: PipelineConfig, run: RunState, stage: str | None, from_layer: int | None
) -> dict[str, int]:
    """stage -> first layer to build: `--from-layer` (its stage: `stage`, default the run's
    first) or else the config's `start_layers` for the run's stages. Layer 2 means from the
    start (nothing to skip) and is left out."""
    if stage is not None and from_layer is None:
        raise ActionError(f"--stage {stage}: give the layer to start it at with --from-layer")
    if from_layer is not None:
        chosen = {stage or run.stages[0]: from_layer}
    else:
        chosen = {s: n for s, n in cfg.start_layers.items() if s in run.stages}
    for s, n in chosen.items():
        if s not in run.stages:
            raise ActionError(f"--stage {s}: not a stage of this run (it has: {run.stages})")
        top = run.top_layers[s]
        if not FIRST_LAYER <= n <= top:
            raise ActionError(f"--from-layer {n}: {s} has layers {FIRST_LAYER}..{top}")
        below = dependencies_in(s, run.stages)
        if n > FIRST_LAYER and below:
            raise ActionError(
                f"{s} cannot start at layer {n} in a run that also builds {', '.join(below)} "
                f"(it would run before them): start it with --stages {s}"
            )
    return {s: n for s, n in chosen.items() if n > FIRST_LAYER}


def layer_chunk_ids(cfg: PipelineConfig, stage: str, layer: int) -> Iterator[int]:
    """Every chunk id of `layer` (as the ledger's rows of `stage` name them)."""
    spec = layer_spec(cfg, stage, layer)
    bits = cfg.ds.graph_config.SPATIAL_BITS
    for coord in itertools.product(*(range(n) for n in spec.grid_shape)):
        yield chunk_id(layer, coord, spec.n_layers, bits)  # type: ignore[arg-type]


def check_layer_done(stage: str, layer: int, total: int, missing: list[int]) -> None:
    """LayerNotDoneError naming how many of the layer's `total` chunks are not marked done
    and a sample of them, if any."""
    if not missing:
        return
    sample = ", ".join(str(c) for c in sorted(missing)[:SAMPLE])
    raise LayerNotDoneError(
        f"cannot start {stage} at layer {layer + 1}: {len(missing)} of {total} chunks of "
        f"{stage} layer {layer} are not marked done (e.g. chunk ids {sample}); build it first "
        f"(start at layer {layer}, or lower)"
    )


def needs_marker_check(cfg: PipelineConfig, stage: str) -> bool:
    """True when a mid-graph start of `stage` must find layer L-1 marked done: its pods write
    done markers. False: the start is trusted (and recorded unverified)."""
    return writes_done_markers(cfg.workloads, stage)


def skip_below(
    run: RunState, stage: str, first: int, by: str, now: datetime, verified: bool = True
) -> list[str]:
    """Record the layers of `stage` below `first` as built before this run, and the start
    itself on the run (who, when, whether layer `first`-1 was found marked done); the keys.
    The stage's setup pass is dropped: it ran when those layers were built (the graph and its
    metadata exist; a second ingest setup would refuse an existing table)."""
    run.mid_graph_starts[stage] = {"layer": first, "by": by, "at": now, "verified": verified}
    run.setups.pop(stage, None)
    keys = []
    for layer in range(FIRST_LAYER, first):
        ls = run.layers[layer_key(stage, layer)]
        ls.phase, ls.done_before, ls.timing.finished_at = Phase.SUCCEEDED, True, now
        ls.approval.granted, ls.approval.by, ls.approval.at = True, by, now
        ls.job.completions = 0
        keys.append(ls.key)
    return keys
