"""The controller checks a completed layer against the ledger before it counts as succeeded
(Firestore and Bigtable emulators; the cluster a recording fake whose Jobs the test
completes): an unmarked chunk makes the layer failed with a `layer_incomplete` alert, and
`run_finished` carries the verdict."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.bigtable.ledger_scan import done_chunk_ids
from shared.config.config_files import load_config
from shared.control.controller import Controller
from shared.operate.operator_actions import resubmit
from shared.reconcile.build_plan import new_run
from shared.reconcile.completeness import layer_grid
from tests.builders.done_rows import write_done_markers
from tests.builders.fakes import RecordingCluster
from tests.builders.stored_runs import DEMO, NOW

CFG = load_config(DEMO)


@pytest.fixture
def setup(store, run, bigtable_table) -> tuple[Controller, RecordingCluster, list, Any]:
    client, _ = bigtable_table
    return (*_controller(store, client), client)


def _controller(store, client) -> tuple[Controller, RecordingCluster, list]:
    """A controller on the store whose done markers are the graph table's; its cluster and
    what it published."""
    cluster, published = RecordingCluster(), []
    controller = Controller(
        store,
        cluster,
        lambda kind, body: published.append((kind, body)),
        clock=lambda: NOW,
        done_markers=lambda _cfg, stage: done_chunk_ids(client, stage),
    )
    return controller, cluster, published


def _complete(store, cluster: RecordingCluster, layer: int) -> str:
    name = store.load_run("r1").layers[f"ingest-L{layer}"].job.name
    job = cluster.jobs[name]
    last = job.completions - 1
    cluster.finish(name, condition="Complete", completion_time=NOW, completed_indexes=f"0-{last}")
    return name


def _mark(client: Any, layer: int, skip: tuple[int, ...] = ()) -> None:
    grid = layer_grid(CFG, "ingest", layer)
    write_done_markers(client, [grid.chunk_id(p) for p in range(grid.chunks) if p not in skip])


def test_a_completed_layer_with_an_unmarked_chunk_fails(store, setup):
    controller, cluster, published, client = setup
    controller.reconcile("r1")  # creates the layer-2 Job
    _complete(store, cluster, 2)
    _mark(client, 2, skip=(77,))
    controller.reconcile("r1")
    ls = store.load_run("r1").layers["ingest-L2"]
    assert ls.phase == "failed" and ls.progress.chunks_marked == 511
    assert "pipeline verify r1 --stage ingest" in ls.failure_reason
    assert "pipeline submit r1 ingest 2" in ls.failure_reason
    [body] = [b for kind, b in published if kind == "layer_incomplete"]
    assert (body["stage"], body["layer"]) == ("ingest", 2)
    assert (body["chunks_expected"], body["chunks_marked"], body["chunks_missing"]) == (512, 511, 1)
    assert body["missing_positions"] == "77"
    [example] = body["missing_examples"]
    assert example["coord"] == [1, 1, 5]
    assert not any(kind == "run_finished" for kind, _ in published)
    assert not any("-l3-" in name for name in cluster.creates)  # layer 3 never starts


def test_a_complete_build_finishes_with_the_verdict(store, setup):
    controller, cluster, published, client = setup
    for layer in range(2, 6):
        controller.reconcile("r1")
        _complete(store, cluster, layer)
        _mark(client, layer)
    controller.reconcile("r1")
    run = store.load_run("r1")
    assert run.status == "succeeded"
    assert [ls.progress.chunks_marked for ls in run.ordered_layers()] == [512, 64, 8, 1]
    [body] = [b for kind, b in published if kind == "run_finished"]
    verdict = body["verify"]["ingest"]
    assert verdict["checked"] and verdict["layers_unchecked"] == []
    assert verdict["chunks_marked"] == verdict["chunks_expected"] == 585
    assert not any(kind == "layer_incomplete" for kind, _ in published)


def test_pipeline_verify_lists_the_unmarked_chunks(firestore_project, bigtable_table, cli):
    from adapters.google.firestore_store import FirestoreRunStore
    from shared.reconcile.build_plan import new_run
    from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT

    client, table_id = bigtable_table
    cfg = CFG.model_copy(update={"graph_id": table_id})
    state = new_run(cfg, "r2", ["ingest", "meshing"], "auto", NOW)
    state.config["bigtable"] = {"project": BIGTABLE_PROJECT, "instance": BIGTABLE_INSTANCE}
    state.config["commands"] = {"meshing": ["python", "-m", "pychunkedgraph.pipeline.meshing"]}
    state.layers["ingest-L2"].phase = "succeeded"
    FirestoreRunStore(firestore_project).create_run(state)
    _mark(client, 2, skip=(0, 1, 2, 300))
    result = cli("verify", "r2", "--json")
    assert result.exit_code == 1, result.output  # a built layer is incomplete
    doc = json.loads(result.output)
    assert doc["complete"] is False
    l2, l3 = doc["stages"]["ingest"]["layers"][:2]
    assert (l2["phase"], l2["chunks_marked"], l2["missing_positions"]) == (
        "succeeded",
        508,
        "0-2,300",
    )
    assert (l3["phase"], l3["chunks_marked"]) == ("waiting", 0)
    assert doc["stages"]["meshing"]["checked"] is False
    result = cli("verify", "r2", "--stage", "ingest")
    assert result.exit_code == 1 and "0-2,300" in result.output and "INCOMPLETE" in result.output
    assert cli("verify", "r2", "--stage", "l2cache").exit_code == 2


def test_a_root_layer_that_failed_its_check_with_every_marker_is_the_check_failing(
    store, bigtable_table
):
    """An image's ingest (PyChunkedGraph's harness) at the root layer: the chunk is marked
    done, then the graph's tests fail and the pod exits 42, so the Job fails with every marker
    in the ledger. The controller reads the ledger for it too and reports the check failing;
    a re-submit's Job completes (only the check re-runs) and the layer is verified."""
    client, _ = bigtable_table
    pcg = CFG.model_copy(
        update={
            "commands": {
                **CFG.commands,
                "ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"],
            }
        }
    )
    state = new_run(pcg, "r-root", ["ingest"], "auto", NOW)
    state.setups.clear()
    for layer in (2, 3, 4):  # built before: the root layer is what this test watches
        state.layers[f"ingest-L{layer}"].phase = "succeeded"
    store.create_run(state)
    controller, cluster, published = _controller(store, client)
    controller.reconcile("r-root")
    root = store.load_run("r-root").layers["ingest-L5"]
    _mark(client, 5)  # the harness marked the root chunk done, then its check failed
    cluster.finish(root.job.name, condition="Failed", reason="FailedIndexes", failed_indexes="0")
    controller.reconcile("r-root")
    root = store.load_run("r-root").layers["ingest-L5"]
    assert (root.phase, root.root_check_failed, root.progress.chunks_marked) == ("failed", True, 1)
    assert root.failure_reason.startswith("root check failed")
    kinds = [kind for kind, _ in published]
    assert "root_check_failed" in kinds and "layer_failed" not in kinds
    assert "failed_indexes" not in kinds and "run_finished" not in kinds
    [body] = [b for kind, b in published if kind == "root_check_failed"]
    assert (body["layer"], body["chunks_marked"]) == (5, 1)

    # The operator's re-submit (as `pipeline submit r-root ingest 5`): the new Job's pod
    # skips the done chunk and re-runs the check, which passes now.
    store.update_run("r-root", lambda r: resubmit(r, "ingest", 5, "ana", NOW))
    controller.reconcile("r-root")  # retires the failed Job, then creates the new one
    controller.reconcile("r-root")
    again = store.load_run("r-root").layers["ingest-L5"]
    assert again.job.attempt == root.job.attempt + 1 and not again.root_check_failed
    cluster.finish(again.job.name, condition="Complete", completion_time=NOW, completed_indexes="0")
    controller.reconcile("r-root")
    done = store.load_run("r-root").layers["ingest-L5"]
    assert (done.phase, done.progress.chunks_marked) == ("succeeded", 1)
