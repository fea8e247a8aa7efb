"""Setup ownership (docs/setup-passes.md): the graph's table as observed decides whether an
image's ingest setup runs plain, with `--exist-ok`, or is refused, and a setup counts only when
the table holds the graph's metadata afterwards; the metadata cell is read without running
anything it holds."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.bigtable.graph_meta_store import decode_meta_cell, meta_record
from shared.config.config_files import load_config
from shared.config.stage_selection import image_owns_table, runs_pcg_ingest_setup, setup_command
from shared.jobs.graph_probe import PROBE_SOURCE
from shared.model.graph_meta import GraphMeta, report_line
from shared.model.layers import layer_count
from shared.ports.cluster import JobStatus
from shared.ports.graph_table import GraphTable, TableState
from shared.reconcile.build_plan import new_run, plan_for
from shared.reconcile.decide import decide
from shared.reconcile.decision import Alert, CreateJob, Snapshot
from shared.reconcile.setup_step import needs_graph_table

ROOT = Path(__file__).resolve().parents[3]
DEMO = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PCG_INGEST = DEMO.model_copy(
    update={
        "commands": {"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]},
        "workloads": {k: v for k, v in DEMO.workloads.items() if k != "ingest"},
    }
)
ABSENT = GraphTable("demo", TableState.ABSENT)
EMPTY = GraphTable("demo", TableState.NO_METADATA)
FOREIGN = GraphTable("demo", TableState.METADATA)  # an image's ChunkedGraphMeta


def ours(size) -> GraphMeta:
    chunk = tuple(DEMO.ds.graph_config.CHUNK_SIZE)
    l2 = tuple(-(-s // c) for s, c in zip(size, chunk, strict=True))
    return GraphMeta((0, 0, 0), tuple(size), chunk, layer_count(l2))


GOOD = ours(DEMO.ds.data_source.size)
WRONG = ours([2 * s for s in DEMO.ds.data_source.size])


def step(cfg, run, table, jobs=None, logs=None):
    seen = Snapshot(run, jobs or {}, {}, setup_logs=logs or {}, graph_table=table)
    return decide(seen, plan_for(cfg, run, table), None, T0)


def command(cfg, run, table) -> list[str]:
    manifest = plan_for(cfg, run, table).setups["ingest"].manifest
    return manifest["spec"]["template"]["spec"]["containers"][0]["command"]


# ---- who owns the table -------------------------------------------------------------------


def test_an_image_run_ingest_owns_the_table_and_our_worker_does_not():
    assert image_owns_table(PCG_INGEST) and runs_pcg_ingest_setup(PCG_INGEST, "ingest")
    assert not image_owns_table(DEMO) and not runs_pcg_ingest_setup(DEMO, "ingest")
    assert not runs_pcg_ingest_setup(PCG_INGEST, "meshing")


def test_an_override_that_runs_the_images_ingest_setup_gets_exist_ok_too():
    argv = ["/venv/bin/python", "-m", "pychunkedgraph.pipeline.ingest.setup", "demo"]
    cfg = DEMO.model_copy(update={"commands": {"ingest_setup": argv}})
    assert runs_pcg_ingest_setup(cfg, "ingest")
    assert setup_command(cfg, "ingest", exist_ok=True) == [*argv, "--exist-ok"]
    already = DEMO.model_copy(update={"commands": {"ingest_setup": [*argv, "--exist-ok"]}})
    assert setup_command(already, "ingest", exist_ok=True) == [*argv, "--exist-ok"]
    other = DEMO.model_copy(update={"commands": {"ingest_setup": ["x"]}})
    assert setup_command(other, "ingest", exist_ok=True) == ["x"]


# ---- before the setup: the table decides ---------------------------------------------------


@pytest.mark.parametrize(
    ("table", "created", "exist_ok"),
    [(ABSENT, True, False), (FOREIGN, True, True), (GraphTable("demo", TableState.METADATA, GOOD),
     True, True), (None, False, None), (EMPTY, False, None)],
)  # fmt: skip
def test_an_images_ingest_setup_follows_the_tables_state(table, created, exist_ok):
    run = new_run(PCG_INGEST, "r1", ["ingest"], "auto", T0)
    d = step(PCG_INGEST, run, table)
    jobs = [a for a in d.actions if isinstance(a, CreateJob)]
    assert bool(jobs) == created
    if created:
        assert ("--exist-ok" in command(PCG_INGEST, run, table)) == exist_ok
        assert d.state.setups["ingest"].phase == "running"


def test_a_table_without_metadata_refuses_the_images_setup_naming_the_fix():
    run = new_run(PCG_INGEST, "r1", ["ingest"], "auto", T0)
    d = step(PCG_INGEST, run, EMPTY)
    setup = d.state.setups["ingest"]
    assert setup.phase == "failed" and "without graph metadata" in setup.failure_reason
    assert "already exists" in setup.failure_reason and "--exist-ok" in setup.failure_reason
    [alert] = [a for a in d.actions if isinstance(a, Alert)]
    assert alert.kind == "setup_failed"
    assert alert.details["fix"] == (
        "delete the empty table (`cbt -project local-demo -instance demo deletetable demo`), "
        "then `pipeline submit r1 ingest 0`"
    )
    assert d.state.layers["ingest-L2"].phase == "waiting"
    assert step(PCG_INGEST, d.state, EMPTY).actions == []  # refused once, not again


def test_our_workers_setup_fills_a_table_without_metadata():
    run = new_run(DEMO, "r1", ["ingest"], "auto", T0)
    d = step(DEMO, run, EMPTY)
    assert [a.layer for a in d.actions if isinstance(a, CreateJob)] == [0]
    assert "--exist-ok" not in command(DEMO, run, GraphTable("demo", TableState.METADATA, GOOD))


# ---- after the setup: the table judges it --------------------------------------------------


def completed(cfg, table, log=""):
    run = new_run(cfg, "r1", ["ingest"], "auto", T0)
    d = step(cfg, run, ABSENT)
    name = d.state.setups["ingest"].job_name
    job = JobStatus(name, {}, {}, 1, 1, False, condition="Complete", completion_time=T0)
    return step(cfg, d.state, table, {name: job}, {name: log})


@pytest.mark.parametrize(
    ("table", "log", "phase", "reason"),
    [
        (GraphTable("demo", TableState.METADATA, GOOD), "", "succeeded", ""),
        # the table's record is judged against the grid even when nothing was printed
        (GraphTable("demo", TableState.METADATA, WRONG), "", "failed", "planned by the controller"),
        # the log's report counts only when the table's metadata cannot be read
        (FOREIGN, report_line(WRONG), "failed", "planned by the controller"),
        (FOREIGN, report_line(GOOD), "succeeded", ""),
        (GraphTable("demo", TableState.METADATA, GOOD), report_line(WRONG), "succeeded", ""),
        # no metadata in the table: failed, whatever the pod printed
        (EMPTY, report_line(GOOD), "failed", "exists without graph metadata (no row meta, "
         "column 0:meta)"),
        (ABSENT, "", "failed", "table demo in local-demo/demo does not exist"),
        (None, "", "running", ""),  # judged once the table is read
    ],
)  # fmt: skip
@pytest.mark.parametrize("cfg", [DEMO, PCG_INGEST], ids=["worker", "image"])
def test_a_completed_setup_counts_only_with_the_metadata_in_the_table(
    cfg, table, log, phase, reason
):
    d = completed(cfg, table, log)
    setup = d.state.setups["ingest"]
    assert setup.phase == phase and reason in setup.failure_reason
    if phase == "failed":
        assert [a.kind for a in d.actions if isinstance(a, Alert)] == ["setup_failed"]
        assert d.state.layers["ingest-L2"].phase == "waiting"


def test_the_table_is_read_only_around_a_setup_pass():
    run = new_run(PCG_INGEST, "r1", ["ingest", "meshing"], "auto", T0)
    assert needs_graph_table(run, PCG_INGEST, {})  # the image's ingest setup may start
    assert not needs_graph_table(run, DEMO, {})  # our worker's: any table will do
    run.status = "paused"
    assert not needs_graph_table(run, PCG_INGEST, {})
    run.status = "running"
    setup = run.setups["ingest"]
    setup.phase, setup.job_name = "running", "j"
    at_work = JobStatus("j", {}, {}, 1, 1, False)
    done = JobStatus("j", {}, {}, 1, 1, False, condition="Complete")
    assert not needs_graph_table(run, PCG_INGEST, {"j": at_work})  # nothing to judge yet
    for cfg in (PCG_INGEST, DEMO):
        assert needs_graph_table(run, cfg, {"j": done})  # its end is judged by the table
    assert needs_graph_table(run, PCG_INGEST, {"j": None})  # created again: its command
    assert not needs_graph_table(run, DEMO, {"j": None})
    setup.phase = "succeeded"
    assert not needs_graph_table(run, PCG_INGEST, {})  # meshing's waits on ingest's layers


# ---- reading the metadata cell -------------------------------------------------------------

RAN: list[str] = []


class ImageMeta:
    """Stands for PyChunkedGraph's ChunkedGraphMeta: unpickling it would run its code."""

    def __setstate__(self, state):
        RAN.append("setstate")


@pytest.mark.parametrize(
    ("value", "state", "meta"),
    [
        (None, TableState.NO_METADATA, None),  # no cell
        (pickle.dumps(None), TableState.NO_METADATA, None),  # kvdbclient's create(None)
        (pickle.dumps(meta_record(GOOD)), TableState.METADATA, GOOD),
        (pickle.dumps(ImageMeta()), TableState.METADATA, None),
        (pickle.dumps({"kind": "other"}), TableState.METADATA, None),
        (b"not a pickle", TableState.METADATA, None),
    ],
)
def test_the_metadata_cell_is_decoded_without_running_what_it_holds(value, state, meta):
    assert decode_meta_cell("g", value) == GraphTable("g", state, meta)
    assert RAN == []


@pytest.mark.parametrize(
    ("table", "note", "warning"),
    [
        (ABSENT, "table demo in p/i does not exist: the ingest setup pass creates it", ""),
        (FOREIGN, "holds the graph's metadata: the ingest setup pass runs with --exist-ok", ""),
        (EMPTY, "exists without graph metadata", "delete the empty table (`cbt -project p "
         "-instance i deletetable demo`) before `pipeline start`"),
    ],
)  # fmt: skip
def test_pipeline_setup_says_what_an_images_ingest_setup_will_find(table, note, warning):
    from scripts.commands.run import image_table_note

    said, warned = image_table_note(table, "p", "i")
    assert note in said and warning in warned and bool(warned) == bool(warning)


@pytest.mark.parametrize(
    ("cfg", "phase", "reason"),
    [
        (DEMO, "succeeded", ""),  # our worker's setup: its record is in the table
        (PCG_INGEST, "failed", "its graph probe reported no graph metadata"),
    ],
    ids=["worker", "image"],
)
def test_an_images_setup_that_reports_no_grid_fails(cfg, phase, reason):
    d = completed(cfg, FOREIGN, "PyChunkedGraph: table created")
    setup = d.state.setups["ingest"]
    assert setup.phase == phase and reason in setup.failure_reason


def with_grids(meta: GraphMeta, grids: dict[int, tuple[int, int, int]]) -> GraphMeta:
    return GraphMeta(meta.bounds_lo, meta.bounds_hi, meta.chunk_size, meta.layer_count,
                     tuple(sorted(grids.items())))  # fmt: skip


def test_the_image_s_layer_grids_are_checked_against_the_jobs():
    l2 = tuple(-(-s // c) for s, c in zip(GOOD.size, GOOD.chunk_size, strict=True))
    fits = {2: l2, 3: tuple(-(-g // 2) for g in l2)}
    assert (
        completed(PCG_INGEST, FOREIGN, report_line(with_grids(GOOD, fits)))
        .state.setups["ingest"]
        .phase
        == "succeeded"
    )
    floored = {**fits, 3: tuple(g // 2 - 1 for g in l2)}  # an image's own rounding
    setup = completed(PCG_INGEST, FOREIGN, report_line(with_grids(GOOD, floored))).state.setups[
        "ingest"
    ]
    assert setup.phase == "failed"
    assert f"layer 3 chunk grid {list(floored[3])} iterated by the image vs {list(fits[3])}" in (
        setup.failure_reason
    )


def test_an_images_setup_runs_through_the_graph_probe_and_ours_does_not():
    image = command(PCG_INGEST, new_run(PCG_INGEST, "r1", ["ingest"], "auto", T0), ABSENT)
    assert image[:3] == ["python", "-u", "-c"] and image[3] == PROBE_SOURCE
    assert image[4:] == ["demo", "python", "-m", "pychunkedgraph.pipeline.ingest.setup", "demo"]
    ours_ = command(DEMO, new_run(DEMO, "r1", ["ingest"], "auto", T0), ABSENT)
    assert ours_ == ["python", "-m", "worker.setup"]
