"""The completeness check of a build: chunks marked done in the ledger against the planned grid.

After a layer's Job completes, every chunk of the layer's grid should carry its done marker
(`chunk_done` in the graph's table, see docs/verify.md). This module compares the done chunk
ids read from the ledger (by a :class:`DoneMarkerScan`, an adapter) with the layer's grid and
describes what is missing as intervals of flat grid positions (C order, z fastest, as
`shared.model.grid` numbers them) plus a bounded list of examples with coordinates and chunk ids.

Only stages whose workers write done markers can be checked (:func:`marker_coverage`): our
worker (a `workloads` plugin, the demo's) and a PyChunkedGraph image's ingest do; that
image's meshing, migration and the L2 cache image do not. Pure module: numpy only, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.jobs.layer_spec import layer_spec
from shared.model import intervals
from shared.model.layers import LAYER_ID_BITS, bits_per_dim, chunk_id
from shared.model.phase import Phase
from shared.model.stages import DEFAULT_COMMAND, FIRST_LAYER
from shared.model.state import layer_key

if TYPE_CHECKING:  # annotations only: the worker imports the pure modules without pydantic
    from shared.config.config import PipelineConfig
    from shared.model.state import RunState

MAX_RANGES = 50  # missing intervals one verdict lists (the count says how many there are)
MAX_EXAMPLES = 10  # missing chunks one verdict names with coordinates and chunk id
_OFFSET = 64 - LAYER_ID_BITS

#: The done chunk ids of one stage (any layer) in the config's graph table, as a uint64 array.
DoneMarkerScan = Callable[["PipelineConfig", str], np.ndarray]


@dataclass(frozen=True)
class Coverage:
    """Whether a stage's workers write done markers (`checkable`), and why (`why`)."""

    checkable: bool
    why: str


def marker_coverage(cfg: PipelineConfig, stage: str) -> Coverage:
    """What the ledger can say about `stage`: its pods run our worker (no `commands.<stage>`,
    or one that starts our worker) or a PyChunkedGraph image's ingest, whose harness writes
    the done markers; any other image command (meshing, migration, l2cache) writes none."""
    command = tuple(cfg.commands.get(stage) or ())
    if not command or command[: len(DEFAULT_COMMAND)] == DEFAULT_COMMAND:
        return Coverage(True, "its pods run the worker, which marks each chunk done")
    if stage == "ingest":
        return Coverage(True, "its image's ingest marks each chunk done in the ledger")
    return Coverage(
        False,
        f"its pods run the image's own command ({' '.join(command)}), which writes no done "
        "markers: only the Job's completed indexes vouch for its chunks",
    )


@dataclass(frozen=True)
class LayerGrid:
    """One layer's planned chunk grid and how its chunk ids are encoded."""

    stage: str
    layer: int
    shape: tuple[int, int, int]
    n_layers: int  # the graph's root layer
    spatial_bits: int  # graph_config.SPATIAL_BITS

    @property
    def chunks(self) -> int:
        return math.prod(self.shape)

    @property
    def bits(self) -> int:
        """Bits per coordinate in the layer's chunk ids."""
        return bits_per_dim(self.n_layers, self.layer, self.spatial_bits)

    def coord(self, position: int) -> tuple[int, int, int]:
        """The (x, y, z) of flat position `position` (C order)."""
        _, ny, nz = self.shape
        return (position // (ny * nz), (position // nz) % ny, position % nz)

    def chunk_id(self, position: int) -> int:
        """The chunk id of flat position `position`."""
        return chunk_id(self.layer, self.coord(position), self.n_layers, self.spatial_bits)


def layer_grid(cfg: PipelineConfig, stage: str, layer: int) -> LayerGrid:
    """The planned grid of `stage` at `layer` (`shared.jobs.layer_spec`)."""
    spec = layer_spec(cfg, stage, layer)
    return LayerGrid(stage, layer, spec.grid_shape, spec.n_layers, cfg.ds.graph_config.SPATIAL_BITS)


def marked_mask(grid: LayerGrid, done_ids: np.ndarray) -> tuple[np.ndarray, int]:
    """A boolean array over the layer's flat positions (True: marked done), and how many done
    ids of this layer lie outside its grid (a grid that disagrees with the workers')."""
    ids = np.asarray(done_ids, dtype=np.uint64)
    ids = ids[(ids >> np.uint64(_OFFSET)) == np.uint64(grid.layer)]
    bits = grid.bits
    mask = np.uint64((1 << bits) - 1)
    x, y, z = (((ids >> np.uint64(_OFFSET - k * bits)) & mask).astype(np.int64) for k in (1, 2, 3))
    nx, ny, nz = grid.shape
    inside = (x < nx) & (y < ny) & (z < nz)
    marked = np.zeros(grid.chunks, dtype=bool)
    marked[(x[inside] * ny + y[inside]) * nz + z[inside]] = True
    return marked, int(ids.size - np.count_nonzero(inside))


@dataclass(frozen=True)
class MissingChunk:
    """One chunk of the grid without a done marker."""

    position: int  # flat position in the layer's grid (C order)
    coord: tuple[int, int, int]
    chunk_id: int

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "coord": list(self.coord), "chunk_id": self.chunk_id}


@dataclass(frozen=True)
class LayerVerdict:
    """One layer's chunks marked done against its grid."""

    stage: str
    layer: int
    chunks_expected: int
    chunks_marked: int
    missing_ranges: str = ""  # flat positions, "3,7-9" (the first MAX_RANGES intervals)
    missing_range_count: int = 0  # intervals in all
    examples: tuple[MissingChunk, ...] = ()  # the first MAX_EXAMPLES missing chunks
    outside_grid: int = 0  # done ids of this layer outside the grid

    @property
    def chunks_missing(self) -> int:
        return self.chunks_expected - self.chunks_marked

    @property
    def complete(self) -> bool:
        return self.chunks_missing == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "layer": self.layer,
            "chunks_expected": self.chunks_expected,
            "chunks_marked": self.chunks_marked,
            "chunks_missing": self.chunks_missing,
            "missing_positions": self.missing_ranges,
            "missing_intervals": self.missing_range_count,
            "missing_examples": [m.to_json() for m in self.examples],
            "outside_grid": self.outside_grid,
        }


def missing_runs(missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(firsts, lasts) of the runs of consecutive values in a sorted position array."""
    if missing.size == 0:
        return missing, missing
    breaks = np.flatnonzero(np.diff(missing) != 1)
    return missing[np.r_[0, breaks + 1]], missing[np.r_[breaks, missing.size - 1]]


def verify_layer(grid: LayerGrid, done_ids: np.ndarray) -> LayerVerdict:
    """The verdict of one layer from the stage's done chunk ids (any layer's; others are
    ignored)."""
    marked, outside = marked_mask(grid, done_ids)
    missing = np.flatnonzero(~marked)
    firsts, lasts = missing_runs(missing)
    pairs = zip(firsts[:MAX_RANGES].tolist(), lasts[:MAX_RANGES].tolist(), strict=True)
    examples = tuple(
        MissingChunk(p, grid.coord(p), grid.chunk_id(p)) for p in missing[:MAX_EXAMPLES].tolist()
    )
    return LayerVerdict(
        grid.stage,
        grid.layer,
        grid.chunks,
        grid.chunks - int(missing.size),
        intervals.join(pairs),
        int(firsts.size),
        examples,
        outside,
    )


@dataclass(frozen=True)
class StageVerdict:
    """One stage: what could be checked (`coverage`) and each checked layer's verdict."""

    stage: str
    coverage: Coverage
    layers: tuple[LayerVerdict, ...] = ()
    chunks_expected: int = 0  # over every layer of the stage, checked or not

    @property
    def chunks_marked(self) -> int | None:
        return sum(v.chunks_marked for v in self.layers) if self.coverage.checkable else None

    @property
    def complete(self) -> bool | None:
        """True/False when checked; None when the stage's workers write no markers."""
        return all(v.complete for v in self.layers) if self.coverage.checkable else None

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.coverage.checkable,
            "why": self.coverage.why,
            "complete": self.complete,
            "chunks_expected": self.chunks_expected,
            "chunks_marked": self.chunks_marked,
            "layers": [v.to_json() for v in self.layers],
        }


def verify_stage(
    cfg: PipelineConfig, stage: str, layers: range, done_ids: np.ndarray | None
) -> StageVerdict:
    """The verdict of `layers` of `stage`; `done_ids` is None when the stage cannot be
    checked (:func:`marker_coverage`) and so was not read."""
    coverage = marker_coverage(cfg, stage)
    grids = [layer_grid(cfg, stage, layer) for layer in layers]
    expected = sum(g.chunks for g in grids)
    if not coverage.checkable or done_ids is None:
        return StageVerdict(stage, coverage, (), expected)
    return StageVerdict(stage, coverage, tuple(verify_layer(g, done_ids) for g in grids), expected)


def incomplete_details(run_id: str, verdict: LayerVerdict) -> dict[str, Any]:
    """The details of a `layer_incomplete` alert: the counts, the missing chunks (bounded)
    and the fix."""
    return {
        **{k: v for k, v in verdict.to_json().items() if k not in ("stage", "layer")},
        "reason": incomplete_reason(run_id, verdict),
        "fix": f"pipeline verify {run_id} --stage {verdict.stage}, then "
        f"pipeline submit {run_id} {verdict.stage} {verdict.layer}",
    }


def incomplete_reason(run_id: str, verdict: LayerVerdict) -> str:
    """Why a completed layer is failed: how many chunks are unmarked and the way out."""
    return (
        f"incomplete: the Job completed but {verdict.chunks_missing} of "
        f"{verdict.chunks_expected} chunks carry no done marker (flat positions "
        f"{verdict.missing_ranges or '-'}); list them with `pipeline verify {run_id} --stage "
        f"{verdict.stage}`, then `pipeline submit {run_id} {verdict.stage} {verdict.layer}` "
        "(done chunks are skipped)"
    )


def run_verdict(cfg: PipelineConfig, run: RunState) -> dict[str, dict[str, Any]]:
    """Per stage, what the controller's checks recorded on the run's layers (`run_finished`
    carries it): `checked`, `chunks_marked` and `chunks_expected` over the checked layers,
    the layers left unchecked, and why a stage could not be checked at all."""
    out: dict[str, dict[str, Any]] = {}
    for stage in run.stages:
        coverage = marker_coverage(cfg, stage)
        mine = [ls for ls in run.ordered_layers() if ls.stage == stage]
        chunks = {ls.layer: layer_grid(cfg, stage, ls.layer).chunks for ls in mine}
        entry: dict[str, Any] = {"checked": coverage.checkable}
        entry["chunks_expected"] = sum(chunks.values())
        if coverage.checkable:
            # Layers built before the run were checked by `pipeline start --from-layer`.
            marked = {
                ls.layer: chunks[ls.layer] if ls.done_before else ls.progress.chunks_marked
                for ls in mine
            }
            entry["chunks_marked"] = sum(n for n in marked.values() if n is not None)
            entry["layers_unchecked"] = [layer for layer, n in marked.items() if n is None]
        else:
            entry["chunks_marked"] = None
            entry["why"] = coverage.why
        out[stage] = entry
    return out


def verify_run(
    cfg: PipelineConfig, run: RunState, scan: DoneMarkerScan, stage: str | None = None
) -> dict[str, StageVerdict]:
    """Every layer of the run's stages (or of `stage` only) against the ledger, read through
    `scan` once per stage whose workers write done markers. LookupError for a stage the
    run does not build."""
    if stage is not None and stage not in run.stages:
        raise LookupError(f"--stage {stage}: not a stage of run {run.run_id} ({run.stages})")
    out = {}
    for name in [stage] if stage else run.stages:
        layers = range(FIRST_LAYER, run.top_layers[name] + 1)
        done = scan(cfg, name) if marker_coverage(cfg, name).checkable else None
        out[name] = verify_stage(cfg, name, layers, done)
    return out


def run_complete(run: RunState, verdicts: dict[str, StageVerdict]) -> bool:
    """Whether every layer the run records as built (succeeded) is complete in the ledger,
    and no layer failed the root check with its markers complete (shared.reconcile.root_check:
    complete markers there do not make a built layer)."""
    if root_check_failures(run, verdicts):
        return False
    for verdict in verdicts.values():
        for v in verdict.layers:
            ls = run.layers.get(layer_key(v.stage, v.layer))
            if ls is not None and ls.phase == Phase.SUCCEEDED and not v.complete:
                return False
    return True


def root_check_failures(run: RunState, verdicts: dict[str, StageVerdict]) -> list[LayerVerdict]:
    """The verified layers the run records as having failed PyChunkedGraph's root check."""
    return [
        v
        for verdict in verdicts.values()
        for v in verdict.layers
        if (ls := run.layers.get(layer_key(v.stage, v.layer))) is not None and ls.root_check_failed
    ]
