"""`pipeline start --from-layer` through the CLI against the emulators: a stage whose pods write
no done markers (an image's meshing) starts mid-graph at once, recorded on the run as
unverified and shown by `pipeline status`; an image's ingest is still refused until the layer
below is marked done in the graph's table (docs/predecessor-configs.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import yaml

from adapters.bigtable.chunk_ledger import close_bigtable_client, open_bigtable_client
from tests.builders.stored_runs import DEMO

PCG = "caveconnectome/pychunkedgraph:v3.2.0.dev6"


def _image_config(tmp_path: Path) -> tuple[str, dict]:
    """The demo with ingest and meshing run by PyChunkedGraph images' entry points, on a
    graph of its own (PyChunkedGraph's ids may carry upper case and dots)."""
    raw = yaml.safe_load(DEMO.read_text())
    raw["graph_id"] = f"Demo.V1.{uuid.uuid4().hex[:6]}"
    raw["workloads"] = {"l2cache": raw["workloads"]["l2cache"]}
    raw["images"].update(ingest=PCG, meshing=PCG)
    raw["commands"] = {
        "ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"],
        "meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"],
    }
    dataset = yaml.safe_load((DEMO.parent / "dataset.yml").read_text())
    (tmp_path / "ws").mkdir()  # a watershed that exists (the preflight looks for it)
    dataset["data_source"]["watershed"] = "ws"
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(dataset))
    (tmp_path / "pipeline.yml").write_text(yaml.safe_dump(raw))
    return str(tmp_path / "pipeline.yml"), raw


def test_an_image_meshing_starts_unverified_and_status_shows_it(cli, store, tmp_path):
    cfg, _ = _image_config(tmp_path)
    args = ("start", "-c", cfg, "--stages", "meshing", "--advance", "manual")
    out = cli(*args, "--run-id", "mesh-mid", "--from-layer", "3")
    assert out.exit_code == 0, out.output
    assert "meshing started at layer 3 by alice" in out.output and "NOT verified" in out.output
    run = store.load_run("mesh-mid")
    start = run.mid_graph_starts["meshing"]
    assert (start["layer"], start["by"], start["verified"]) == (3, "alice", False)
    assert run.layers["meshing-L2"].done_before and not run.layers["meshing-L3"].done_before
    shown = cli("status", "mesh-mid", "--once")
    assert shown.exit_code == 0, shown.output
    assert "layers 2..2 NOT verified" in " ".join(shown.output.split())


def test_an_image_ingest_keeps_its_marker_check(cli, tmp_path, emulators):
    cfg, raw = _image_config(tmp_path)
    bt = raw["bigtable"]
    table = open_bigtable_client(
        raw["graph_id"], bt["project"], bt["instance"], timedelta(seconds=30), create=True
    )
    close_bigtable_client(table)  # the graph's table, no chunk marked done
    args = ("start", "-c", cfg, "--stages", "ingest", "--advance", "manual")
    out = cli(*args, "--run-id", "ingest-mid", "--from-layer", "3")
    assert out.exit_code != 0
    assert "chunks of ingest layer 2 are not marked done" in out.output


def test_a_meshing_start_on_a_graph_whose_root_check_failed_is_refused(cli, store, tmp_path):
    """The earlier run's ingest root layer failed PyChunkedGraph's root check with its chunk
    marked done: a meshing run (here mid-graph, `--from-layer 3`) is refused naming the root
    check and the re-submit, not started as on a complete graph; `--force` starts it."""
    cfg, _ = _image_config(tmp_path)
    first = cli("start", "-c", cfg, "--stages", "ingest", "--run-id", "ing", "--no-preflight")
    assert first.exit_code == 0, first.output
    top = store.load_run("ing").top_layers["ingest"]

    def root_check_failed(run) -> None:
        root = run.layers[f"ingest-L{top}"]
        root.phase, root.root_check_failed = "failed", True
        run.status = "failed"

    store.update_run("ing", root_check_failed)
    args = ("start", "-c", cfg, "--stages", "meshing", "--from-layer", "3", "--no-preflight")
    refused = cli(*args, "--run-id", "mesh-after")
    assert refused.exit_code == 2, refused.output
    assert "failed the root check" in refused.output
    assert f"pipeline submit ing ingest {top}" in refused.output
    forced = cli(*args, "--run-id", "mesh-forced", "--force", "--reason", "meshes anyway")
    assert forced.exit_code == 0, forced.output
