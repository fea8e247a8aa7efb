"""The graph probe: how a PyChunkedGraph image's setup pod reports the graph's geometry as
the image itself reads it. Pure module (docs/setup-passes.md#the-grid-the-images-iterate).

PyChunkedGraph's harness takes each layer's chunk grid from the graph's metadata
(`ChunkedGraphMeta.layer_chunk_bounds`, computed by the image's own code from the watershed's
bounds), never from `PCG_GRID_SHAPE`; the Job's completions come from the controller's grid.
The metadata cell holds a pickled ChunkedGraphMeta the controller never unpickles, so the
image's setup pod reads it: its command becomes ``python -u -c PROBE_SOURCE <graph> <setup
argv...>``, which runs the setup unchanged (its exit status is the pod's when it fails) and
then, with the image's `pychunkedgraph`, prints one ``{"graph_meta": {...}}`` line
(`shared.model.graph_meta`): voxel bounds, chunk size, layer count and every layer's chunk
grid. The predecessor read the same numbers (`meta.layer_chunk_counts`) in a one-shot pod of
the image. A probe that cannot read the graph exits PROBE_FAILED with the reason on one line.
"""

from __future__ import annotations

PROBE_FAILED = 3  # the setup succeeded, the graph could not be read back

# Static source: the graph id and the setup's argv arrive as argv, never interpolated.
PROBE_SOURCE = """
import json, os, subprocess, sys

code = subprocess.call(sys.argv[2:])
if code:
    os._exit(code)
try:
    from pychunkedgraph.graph import ChunkedGraph

    meta = ChunkedGraph(graph_id=sys.argv[1]).meta
    lo, hi = ([int(v) for v in side] for side in zip(*meta.voxel_bounds))
    grids = {str(int(k)): [int(v) for v in g] for k, g in meta.layer_chunk_bounds.items()}
    report = {
        "bounds_lo": lo,
        "bounds_hi": hi,
        "chunk_size": [int(v) for v in meta.graph_config.CHUNK_SIZE],
        "layer_count": int(meta.layer_count),
        "layer_chunk_bounds": grids,
    }
    line = {"severity": "INFO", "message": "graph metadata", "graph_meta": report}
    code = 0
except Exception as exc:
    line = {
        "severity": "ERROR",
        "message": "graph probe: the setup completed but the graph could not be read back: "
        + type(exc).__name__ + ": " + str(exc),
    }
    code = 3  # PROBE_FAILED
sys.stdout.write(json.dumps(line) + "\\n")
sys.stdout.flush()
os._exit(code)  # the Bigtable client's threads can hang an interpreter's exit
"""


def with_graph_probe(argv: list[str], graph_id: str) -> list[str]:
    """The setup command `argv` run through the graph probe for graph `graph_id`."""
    return ["python", "-u", "-c", PROBE_SOURCE, graph_id, *argv]


def runs_in_pcg_image(argv: list[str] | None) -> bool:
    """Whether a setup command runs one of PyChunkedGraph's own modules (so its image has
    `pychunkedgraph` to read the graph with)."""
    return bool(argv) and any(a.startswith("pychunkedgraph.") for a in argv or [])
