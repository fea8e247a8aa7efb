"""Predecessor-shaped files mean what they meant to the predecessor (docs/predecessor-configs.md):
the per-workload deep merge, its defaults for omitted keys, what it and PyChunkedGraph accept
(graph ids, graph_config keys, env keys, a max_layer past the root, custom commands), its image
floor, and mid-graph starts of stages whose pods write no done markers. A file in the new
shape keeps this project's defaults."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from scripts.secret_files import read_secret_files
from scripts.views.status import status_view
from shared.config.config import ConfigError, PipelineConfig
from shared.config.config_compat import CompatError, check_image_floor, image_version, map_pipeline
from shared.config.config_files import config_from_dict, load_config
from shared.config.stage_selection import top_layer
from shared.jobs.layer_spec import job_name
from shared.jobs.manifest import job_labels, render_job
from shared.jobs.setup_job import dataset_config_map_manifest, setup_job_name
from shared.jobs.worker_pod import dataset_config_map
from shared.model.state import RunState, build_layers
from shared.operate.config_versions import snapshot
from shared.operate.start_from import needs_marker_check, skip_below
from shared.views.progress import describe_start, run_progress
from tests.builders.pcg_harness import HarnessUnavailable

PCG = "caveconnectome/pychunkedgraph:v3.2.0.dev6"
# 8x6x3 layer-2 grid: 5 layers.
DATASET = {"data_source": {"size": [512, 384, 192]}, "graph_config": {"CHUNK_SIZE": [64] * 3}}
OLD = {  # the predecessor's shape (images.pcg)
    "graph_id": "g",
    "bigtable": {"project": "p", "instance": "i"},
    "images": {"pcg": PCG},
    "job": {"resources": {"cpu": {"base": 1, "factor": 2, "max": 16}, "memory": {"base": 4}}},
}
NEW = {  # the new shape
    "graph_id": "g",
    "dataset": "dataset.yml",
    "bigtable": {"project": "p", "instance": "i"},
    "images": {"ingest": "worker:1", "meshing": "worker:1"},
    "workloads": {"ingest": "a.b:c", "meshing": "a.b:d"},
}


def _write(tmp_path: Path, pipeline: dict[str, Any], dataset: dict[str, Any] | None = None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(dataset or DATASET))
    (tmp_path / "pipeline.yml").write_text(yaml.safe_dump(pipeline))
    return tmp_path / "pipeline.yml"


def _load(tmp_path: Path, pipeline: dict[str, Any], dataset: dict[str, Any] | None = None):
    return load_config(_write(tmp_path, pipeline, dataset))


def _requests(cfg: PipelineConfig, stage: str, layer: int) -> tuple[float, float]:
    spec = render_job(cfg, stage, layer, run_id="r", parallelism=1)["spec"]
    req = spec["template"]["spec"]["containers"][0]["resources"]["requests"]
    cpu = int(req["cpu"].removesuffix("m")) / 1000
    return cpu, int(req["memory"].removesuffix("Mi")) / 1024


# --- the per-workload deep merge -------------------------------------------------------------

JOB = {
    "resources": {
        "cpu": {"base": 1, "factor": 2, "max": 16},
        "memory": {"base": 4, "factor": 1.5},
        "overrides": {5: {"memory": 60}},
        "pack": False,  # the merge alone (packing: tests/unit/jobs/test_node_packing.py)
    },
    "ramp": {"start": 4, "factor": 2, "period": 60, "max": 256},
}


@pytest.mark.parametrize(
    ("block", "layer", "want"),
    [
        # The case: base only; factor, max and the overrides stay the job's.
        ({"resources": {"cpu": {"base": 2}, "memory": {"base": 8}}}, 4, (8.0, 18.0)),
        ({"resources": {"cpu": {"base": 2}, "memory": {"base": 8}}}, 5, (16.0, 60.0)),
        ({"resources": {"cpu": {"factor": 1}}}, 4, (1.5, 9.0)),  # flat 1 vCPU; 6.5 GiB/vCPU
        ({"resources": {"cpu": {"base": 5, "max": 0}}}, 4, (20.0, 20.0)),  # cap lifted
        ({"resources": {"cpu": {"base": 5, "max": None}}}, 4, (16.0, 16.0)),  # null: not given
        ({"resources": {"cpu": {"base": 5}}}, 4, (16.0, 16.0)),  # capped by the job's max
        ({"resources": {"overrides": {5: {"cpu": 3}}}}, 5, (9.25, 60.0)),  # memory kept; ratio
        ({"batch_size": 10}, 4, (4.0, 9.0)),  # no resources: the job's curves
    ],
)
def test_a_workload_block_deep_merges_into_job(tmp_path, block, layer, want):
    cfg = _load(tmp_path, {**NEW, "job": {**JOB, "workloads": {"meshing": block}}})
    assert _requests(cfg, "meshing", layer) == want
    # The config stored on a run reads back with the same merge.
    stored = config_from_dict(*snapshot(cfg))
    assert stored.job.for_stage("meshing") == cfg.job.for_stage("meshing")
    assert _requests(cfg, "ingest", layer) == _requests(
        _load(tmp_path, {**NEW, "job": JOB}), "ingest", layer
    )


@pytest.mark.parametrize(
    ("block", "want"),
    [
        ({"ramp": {"max": 8}}, (4, 2.0, 60.0, 8)),
        ({"ramp": {"start": 1, "period": 5}}, (1, 2.0, 5.0, 256)),
        ({}, (4, 2.0, 60.0, 256)),
    ],
)
def test_a_workload_ramp_merges_key_by_key(tmp_path, block, want):
    cfg = _load(tmp_path, {**NEW, "job": {**JOB, "workloads": {"meshing": block}}})
    ramp = cfg.job.for_stage("meshing").ramp
    assert (ramp.start, ramp.factor, ramp.period, ramp.max) == want


def test_a_merge_that_is_not_a_valid_job_names_the_block(tmp_path):
    bad = {**NEW, "job": {"workloads": {"meshing": {"resources": {"cpu": {"factor": 2}}}}}}
    cfg = _load(tmp_path, bad)  # job's cpu curve has a base: the merge is valid
    assert cfg.job.for_stage("meshing").resources.cpu.factor == 2
    bad["job"]["workloads"]["meshing"] = {"resources": {"cpu": {"base": -1}}}
    with pytest.raises(ConfigError, match=r"job\.workloads\.meshing"):
        _load(tmp_path, bad)


# --- defaults of omitted keys ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("get", "old", "new"),
    [
        (lambda c: c.job.ramp.start, 4, 2),
        (lambda c: c.job.ramp.factor, 2, 2),
        (lambda c: c.job.ramp.period, 60, 60),
        (lambda c: c.job.ramp.max, 256, 100),
        (lambda c: c.job.max_failed_tasks, 50, 10),
        (lambda c: c.job.perm_seed, 0, 42),
        (lambda c: c.job.batch_size, 1000, 100),
        (lambda c: c.workload_identity.ksa, "pipeline", "pipeline-worker"),
        (lambda c: c.secret_name, "cloud-volume-secrets", "cloud-volume-secrets"),
        (lambda c: c.namespace, "default", "cave-pipeline"),
        # the predecessor's newest defaults for an old file; ours keep a config's pods as they
        # were (the curves' requests, one process per vCPU)
        (lambda c: c.job.resources.pack, True, False),
        (lambda c: c.job.processes_per_vcpu, 2, 1),
        (lambda c: c.job.for_stage("meshing").resources.pack, True, False),
        (lambda c: c.job.for_stage("meshing").processes_per_vcpu, 2, 1),
    ],
)
def test_omitted_keys_keep_the_shapes_own_defaults(tmp_path, get, old, new):
    assert get(_load(tmp_path / "old", {**OLD, "workload": "ingest"})) == old
    assert get(_load(tmp_path / "new", NEW)) == new


def test_ramp_keys_given_in_an_old_file_stay_and_the_rest_are_noted():
    out, notes = map_pipeline({**OLD, "job": {"ramp": {"max": 32}}})
    assert out["job"]["ramp"] == {"start": 4, "factor": 2, "period": 60, "max": 32}
    keys = {n.old_key for n in notes}
    assert {"job.ramp.start (omitted)", "job.max_failed_tasks (omitted)"} <= keys
    assert "job.ramp.max (omitted)" not in keys
    assert "workload_identity.service_account (omitted)" in keys


@pytest.mark.parametrize(
    ("resources", "noted"),
    [
        ({}, {"cpu", "memory"}),
        ({"cpu": {"base": 1}}, {"memory"}),
        ({"cpu": {"base": 1}, "memory": {"base": 2}}, set()),
    ],
)
def test_curves_the_predecessor_required_are_noted_when_omitted(resources, noted):
    _, notes = map_pipeline({**OLD, "job": {"resources": resources}})
    keys = {n.old_key for n in notes}
    assert {c for c in ("cpu", "memory") if f"job.resources.{c} (omitted)" in keys} == noted


@pytest.mark.parametrize(
    ("shape", "files_at"),
    [
        ("old", "secrets"),  # the predecessor's `--secrets` default, in the working directory
        ("new", "."),  # beside pipeline.yml
    ],
)
def test_secret_files_resolve_against_the_shapes_folder(tmp_path, monkeypatch, shape, files_at):
    work, conf = tmp_path / "work", tmp_path / "work" / "config"
    conf.mkdir(parents=True)
    base = {**(OLD if shape == "old" else NEW), "secret_files": {"google-secret.json": "k.json"}}
    cfg_path = _write(conf, base)
    where = (work / files_at) if shape == "old" else conf
    where.mkdir(exist_ok=True)
    (where / "k.json").write_text(shape)
    monkeypatch.chdir(work)
    assert read_secret_files(load_config(cfg_path)) == {"google-secret.json": shape.encode()}


# --- what PyChunkedGraph and the predecessor accept ------------------------------------------

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@pytest.mark.parametrize("graph_id", ["Fly.V31", "FLY_v31", "fly.v31.2024-01", "_g", "A" * 63])
def test_pychunkedgraph_graph_ids_load_and_name_valid_kubernetes_objects(tmp_path, graph_id):
    cfg = _load(tmp_path, {**NEW, "graph_id": graph_id})
    run_id = f"{graph_id}-20260101-000000-abcd"
    job = render_job(cfg, "ingest", 2, run_id=run_id, parallelism=1)
    assert DNS_LABEL.match(job["metadata"]["name"])
    assert DNS_LABEL.match(job_name(graph_id, "migrate_cleanup", 8, run_id))
    assert DNS_LABEL.match(setup_job_name(graph_id, "migrate_cleanup", run_id))
    assert DNS_LABEL.match(dataset_config_map(graph_id, run_id))
    for value in job_labels(cfg, run_id, "ingest", 2).values():
        assert LABEL_VALUE.match(value), value
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][0] == {
        "name": "PCG_GRAPH_ID",
        "value": graph_id,  # the images get the id unchanged
    }


@pytest.mark.parametrize("graph_id", ["fly v31", "-fly", "fly/v31", "", "a" * 64, "fly:v31"])
def test_graph_ids_pychunkedgraph_refuses_are_refused_naming_the_key(tmp_path, graph_id):
    with pytest.raises(ConfigError, match="graph_id"):
        _load(tmp_path, {**NEW, "graph_id": graph_id})


@pytest.mark.parametrize(
    "extra",
    [
        {"ROOT_LOCK_EXPIRY": 600},
        {"ID_PREFIX": "fly_"},
        {"OVERWRITE": False, "ROOT_COUNTERS": 16, "ID": "x"},
    ],
)
def test_pychunkedgraph_graph_config_keys_reach_the_dataset_file_unchanged(tmp_path, extra):
    dataset = {**DATASET, "graph_config": {**DATASET["graph_config"], **extra}}
    cfg = _load(tmp_path, NEW, dataset)
    written = yaml.safe_load(dataset_config_map_manifest(cfg, "r")["data"]["dataset.yml"])
    assert {k: written["graph_config"][k] for k in extra} == extra


def test_an_unknown_graph_config_key_is_refused_naming_it(tmp_path):
    dataset = {**DATASET, "graph_config": {**DATASET["graph_config"], "ROOT_LOCK_EXPIRE": 6}}
    with pytest.raises(ConfigError, match=r"graph_config\.ROOT_LOCK_EXPIRE"):
        _load(tmp_path, NEW, dataset)


@pytest.mark.parametrize(
    ("max_layer", "top", "noted"), [(3, 3, False), (5, 5, False), (9, 5, True)]
)
def test_a_max_layer_past_the_root_is_clamped_with_a_note(tmp_path, max_layer, top, noted):
    cfg = _load(tmp_path, NEW, {**DATASET, "mesh_config": {"max_layer": max_layer}})
    assert top_layer(cfg, "meshing") == top
    assert (
        any("mesh_config.max_layer: 9 is past the root (layer 5)" in n for n in cfg.load_notes)
        is noted
    )
    written = yaml.safe_load(dataset_config_map_manifest(cfg, "r")["data"]["dataset.yml"])
    assert written["mesh_config"]["max_layer"] == max_layer  # the images get the file's


@pytest.mark.parametrize(
    ("name", "replaces"),
    [
        ("BIGTABLE_PROJECT", "bigtable.project"),
        ("BIGTABLE_INSTANCE", "bigtable.instance"),
        ("PCG_DATASET", "the mounted dataset file"),
        ("PCG_LOCK_EXPIRY_SCALE", "the lock scale"),
    ],
)
@pytest.mark.parametrize("shape", ["old", "new"])
def test_env_keys_the_predecessor_passed_replace_with_a_note(tmp_path, name, replaces, shape):
    cfg = _load(tmp_path, {**(OLD if shape == "old" else NEW), "env": {name: "7"}})
    note = next(n for n in cfg.load_notes if n.startswith(f"env.{name}:"))
    assert replaces in note
    env = render_job(cfg, "ingest", 3, run_id="r", parallelism=1)["spec"]["template"]["spec"][
        "containers"
    ][0]["env"]
    assert [e["value"] for e in env if e["name"] == name] == ["7"]


def test_a_custom_command_in_an_old_file_is_dropped_with_a_note_and_refused_in_a_new_one(
    tmp_path,
):
    cfg = _load(tmp_path / "old", {**OLD, "commands": {"export_roots": ["python", "x.py"]}})
    assert "export_roots" not in cfg.commands
    assert any(n.startswith("commands.export_roots: dropped") for n in cfg.compat_notes)
    with pytest.raises(ConfigError, match=r"commands\.export_roots: unknown stage"):
        _load(tmp_path / "new", {**NEW, "commands": {"export_roots": ["python", "x.py"]}})


# --- the image floor -------------------------------------------------------------------------

FLOOR = [
    ("caveconnectome/pychunkedgraph:v3.2.0.dev6", None),
    ("caveconnectome/pychunkedgraph:v3.2.0.dev7", None),
    ("caveconnectome/pychunkedgraph:v3.2.0rc1", None),
    ("caveconnectome/pychunkedgraph:v3.2.0", None),
    ("caveconnectome/pychunkedgraph:v3.10.1", None),
    ("localhost:5000/pychunkedgraph:v3.2.1", None),
    ("caveconnectome/pychunkedgraph:v3.2.0.dev5", "older than v3.2.0.dev6"),
    ("caveconnectome/pychunkedgraph:v3.1.9", "older than v3.2.0.dev6"),
    ("caveconnectome/pychunkedgraph:latest", "carries no version tag"),
    ("caveconnectome/pychunkedgraph", "carries no version tag"),
    ("localhost:5000/pychunkedgraph", "carries no version tag"),
    ("caveconnectome/pychunkedgraph@sha256:" + "a" * 64, "carries no version tag"),
]


@pytest.mark.parametrize(("image", "error"), FLOOR)
def test_the_image_floor_of_an_old_file(tmp_path, image, error):
    raw = {**OLD, "images": {"pcg": image}}
    if error is None:
        assert _load(tmp_path, raw).images["ingest"] == image
    else:
        with pytest.raises(ConfigError, match=rf"images\.pcg: .*{error}"):
            _load(tmp_path, raw)


@pytest.mark.parametrize(("image", "error"), FLOOR)
def test_the_image_floor_of_a_new_file_for_pychunkedgraph_images(tmp_path, image, error):
    raw = {**NEW, "images": {"ingest": "worker:local", "meshing": image}}
    if error is None:
        _load(tmp_path, raw)
    else:
        with pytest.raises(ConfigError, match=rf"images\.meshing: .*{error}"):
            _load(tmp_path, raw)


@pytest.mark.parametrize("image", [i for i, _ in FLOOR])
def test_the_version_order_is_the_predecessors(image):
    try:
        from tests.builders.predecessor_pkg import predecessor_module

        theirs = predecessor_module("config")
    except HarnessUnavailable as e:
        pytest.skip(str(e))
    floor = f":{theirs.MIN_PCG_IMAGE}"
    assert (image_version(image) >= image_version(floor)) == (
        theirs.image_version(image) >= theirs.image_version(floor)
    )
    with pytest.raises(CompatError) if dict(FLOOR)[image] else _no_error():
        check_image_floor("images.pcg", image)


class _no_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


# --- mid-graph starts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stage", "workloads", "checked"),
    [
        ("ingest", {}, True),  # PyChunkedGraph's ingest workers mark chunks done
        ("meshing", {}, False),  # its meshing, migration and the L2 cache's write no markers
        ("l2cache", {}, False),
        ("migrate", {}, False),
        ("migrate_cleanup", {}, False),
        ("meshing", {"meshing": "worker.workloads.demo:meshing"}, True),  # this project's worker
        ("ingest", {"ingest": "worker.workloads.demo:ingest"}, True),
    ],
)
def test_which_starts_check_done_markers(tmp_path, stage, workloads, checked):
    raw = {**NEW, "images": {s: PCG for s in ("ingest", "meshing", "l2cache", "migrate")}}
    raw["workloads"] = workloads
    raw["commands"] = {s: ["python", "-m", s] for s in ("ingest", "meshing", "l2cache")}
    assert needs_marker_check(_load(tmp_path, raw), stage) is checked


NOW = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)


@pytest.mark.parametrize(
    ("verified", "shown"),
    [
        (
            False,
            "meshing started at layer 4 by ana at 2026-03-04 05:06 UTC: layers 2..3 NOT verified",
        ),
        (
            True,
            "meshing started at layer 4 by ana at 2026-03-04 05:06 UTC: layers 2..3 found marked",
        ),
    ],
)
def test_a_mid_graph_start_is_recorded_on_the_run_and_shown_by_status(verified, shown):
    run = RunState("r", "g", ["meshing"], {"meshing": 6})
    run.layers = build_layers(run.stages, run.top_layers)
    assert skip_below(run, "meshing", 4, "ana", NOW, verified=verified) == [
        "meshing-L2",
        "meshing-L3",
    ]
    assert run.mid_graph_starts["meshing"] == {
        "layer": 4,
        "by": "ana",
        "at": NOW,
        "verified": verified,
    }
    again = RunState.from_docs(run.run_doc(), [ls.to_doc() for ls in run.layers.values()])
    assert describe_start("meshing", again.mid_graph_starts["meshing"]).startswith(shown)
    progress = run_progress(again, [], NOW)
    assert [line[: len(shown)] for line in progress.starts] == [shown]
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(status_view(progress))
    assert shown in console.export_text()


def test_a_missing_secret_file_names_the_key_and_the_folder(tmp_path, monkeypatch):
    import click

    cfg_path = _write(tmp_path / "config", {**OLD, "secret_files": {"google-secret.json": "k"}})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(click.ClickException, match=r"secret_files\.google-secret\.json: .*"
                       r"secrets/k \(under secrets_dir 'secrets'\) cannot be read"):  # fmt: skip
        read_secret_files(load_config(cfg_path))
