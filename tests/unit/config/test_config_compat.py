"""Operators' files in the predecessor's shape load as they are (shared.config.config_compat), and
the grid comes from the watershed's info file when the dataset has no size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from shared.config.config import ConfigError
from shared.config.config_compat import is_predecessor_pipeline, map_dataset, map_pipeline
from shared.config.config_files import load_config
from shared.config.precomputed_info import GridUnreadable, local_info_path, size_from_info
from shared.jobs.manifest import render_job
from shared.jobs.render_check import validate_config_renders

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "predecessor" / "pipeline.yml"
NEW = {"graph_id": "g", "dataset": "d.yml", "bigtable": {"project": "p", "instance": "i"}}
PCG = "caveconnectome/pychunkedgraph:v3.2.0.dev6"


@pytest.mark.parametrize(
    ("raw", "predecessor"),
    [
        (NEW, False),
        ({**NEW, "images": {"ingest": PCG}}, False),
        ({**NEW, "images": {"pcg": PCG}}, True),
        ({**NEW, "workload": "meshing"}, True),
        ({**NEW, "persistent_util": True}, True),
        ({**NEW, "workload_identity": {"service_account": "sa"}}, True),
    ],
)
def test_is_predecessor_pipeline(raw, predecessor):
    assert is_predecessor_pipeline(raw) is predecessor


def test_a_new_shape_file_passes_unchanged():
    raw = {**NEW, "images": {"ingest": PCG}, "workloads": {"ingest": "a.b:c"}, "job": {}}
    assert map_pipeline(raw) == (raw, [])
    assert map_dataset({"data_source": {"size": [1, 2, 3]}}) == (
        {"data_source": {"size": [1, 2, 3]}},
        [],
    )


def test_an_empty_env_block_is_an_empty_mapping():
    out, notes = map_pipeline({**NEW, "env": None})
    assert out["env"] == {} and notes == []


@pytest.mark.parametrize(
    ("raw", "check", "note"),
    [
        (
            {"images": {"pcg": PCG}},
            lambda o: (
                o["images"] == {s: PCG for s in ("ingest", "meshing", "migrate", "migrate_cleanup")}
            ),
            "images.pcg: serves images.ingest",
        ),
        (
            {"images": {"pcg": PCG}},
            lambda o: (
                o["commands"]["ingest"] == ["python", "-m", "pychunkedgraph.pipeline.ingest"]
                and o["commands"]["migrate_cleanup"][-1] == "--clean"
            ),
            "commands.ingest (omitted): the image's entry point",
        ),
        (
            {"images": {"pcg": PCG, "l2cache": "l2:1"}},
            lambda o: o["commands"]["l2cache"] == ["python", "-m", "pcgl2cache.pipeline.l2cache"],
            "commands.l2cache",
        ),
        (
            {"images": {"pcg": PCG}, "commands": {"ingest": ["my", "entry"]}},
            lambda o: o["commands"]["ingest"] == ["my", "entry"],
            "commands.meshing",
        ),
        (
            {"workload_identity": {"service_account": "sa", "gsa_email": "e"}},
            lambda o: o["workload_identity"] == {"ksa": "sa", "setup_ksa": "sa", "gsa_email": "e"},
            "workload_identity.service_account: renamed workload_identity.ksa",
        ),
        ({"workload": "ingest"}, lambda o: "workload" not in o, "workload: dropped"),
        ({"persistent_util": True}, lambda o: "persistent_util" not in o, "persistent_util"),
        ({"database": {"cost": "x"}}, lambda o: "database" not in o, "database: dropped"),
        (
            {"workload": "ingest"},
            lambda o: (o["job"]["perm_seed"], o["job"]["batch_size"]) == (0, 1000),
            "job.perm_seed (omitted): 0, the predecessor's default",
        ),
        (
            {"workload": "ingest", "job": {"resources": {"cpu": {"base": 1}, "pack": 2}}},
            lambda o: o["job"]["resources"] == {"cpu": {"base": 1}, "pack": True},  # bool(2)
            "job.resources.pack: true: curve requests grow to fill the node",
        ),
        (
            {"workload": "ingest", "job": {"resources": {"cpu": {"base": 1}, "pack": False}}},
            lambda o: o["job"]["resources"] == {"cpu": {"base": 1}, "pack": False},
            "job.resources.pack: false: requests are the curves', as in 0.0.4",
        ),
        (
            {"workload": "ingest"},
            # written out: this project's own default is off
            lambda o: o["job"]["resources"]["pack"] is True,
            "job.resources.pack (omitted): true, the predecessor's newest default, written out",
        ),
        (
            {"workload": "ingest", "job": {"resources": {"pack": None}}},  # `pack:` empty
            lambda o: o["job"]["resources"] == {"pack": True},
            "job.resources.pack (omitted): true, the predecessor's newest default, written out",
        ),
        (
            {"images": {"pcg": PCG}},
            lambda o: "PCG_HELD_MAX_WAIT_SEC" not in (o.get("env") or {}),  # the Job writes it
            "env.PCG_HELD_MAX_WAIT_SEC (omitted): 2 x (claim lifetime + a poll)",
        ),
        (
            {"images": {"pcg": PCG}},
            lambda o: True,
            "(image pods) terminationGracePeriodSeconds: 5 s",
        ),
        (
            {"workload": "ingest"},
            lambda o: o["job"]["processes_per_vcpu"] == 2,  # written out: ours is 1
            "job.processes_per_vcpu (omitted): 2, the predecessor's newest default, written "
            "out: PCG_N_PROCESSES = 2 x the whole billed vCPU",
        ),
        (
            {"workload": "ingest", "job": {"processes_per_vcpu": 1}},
            lambda o: o["job"]["processes_per_vcpu"] == 1,  # given: kept, no note
            "workload: dropped",
        ),
        (
            {"workload": "ingest", "job": {"resources": {"memory": {"base": 1, "max": 0}}}},
            lambda o: o["job"]["resources"]["memory"] == {"base": 1},
            "workload: dropped",
        ),
        (
            {"workload": "ingest", "job": {"workloads": {"meshing": {"start_layer": 3}}}},
            lambda o: (
                o["job"]["workloads"]["meshing"] == {} and o["start_layers"] == {"meshing": 3}
            ),
            "job.workloads.meshing.start_layer: read as start_layers.meshing: 3",
        ),
        (
            {"workload": "ingest", "job": {"workloads": {"meshing": {"start_layer": 2}}}},
            lambda o: o["job"]["workloads"]["meshing"] == {} and "start_layers" not in o,
            "job.workloads.meshing.start_layer: dropped (each stage starts at layer 2)",
        ),
        ({"workload": "ingest"}, lambda o: o["dataset"] == "d.yml", "workload: dropped"),
    ],
)
def test_predecessor_keys_are_mapped_with_a_note(raw, check, note):
    out, notes = map_pipeline({**NEW, **raw})
    assert check(out), out
    assert any(str(n).startswith(note) for n in notes), notes


@pytest.mark.parametrize(
    ("env", "noted"),
    [
        ({}, {"env.PCG_PROFILER_ENABLED (omitted)", "env.PCG_HELD_MAX_WAIT_SEC (omitted)"}),
        ({"PCG_PROFILER_ENABLED": "1"}, {"env.PCG_HELD_MAX_WAIT_SEC (omitted)"}),
        ({"PCG_HELD_MAX_WAIT_SEC": "400"}, {"env.PCG_PROFILER_ENABLED (omitted)"}),
    ],
)
def test_image_pod_notes_only_for_what_the_file_leaves_to_the_job(env, noted):
    _, notes = map_pipeline({**NEW, "images": {"pcg": PCG}, "env": env})
    assert {n.old_key for n in notes if n.old_key.startswith("env.")} == noted


def test_upper_case_data_source_keys():
    out, notes = map_dataset(
        {"data_source": {"WATERSHED": "gs://w", "EDGES": "gs://e", "DATA_VERSION": 4}}
    )
    assert out["data_source"] == {"watershed": "gs://w", "edges": "gs://e", "DATA_VERSION": 4}
    assert any(
        str(n).startswith("data_source.WATERSHED: read as data_source.watershed") for n in notes
    )


def test_the_example_pair_loads_and_renders():
    cfg = load_config(EXAMPLE)
    assert cfg.layer2_shape() == (64, 32, 8)  # 16384x8192x4096 voxels from watershed/info
    assert cfg.workload_identity.ksa == "pipeline"
    assert (cfg.job.perm_seed, cfg.job.batch_size) == (0, 1000)
    assert cfg.secret_files == {"google-secret.json": "google-secret.json"}
    assert cfg.ds.data_source.watershed.startswith("file://")
    assert cfg.ds.backend_client is not None and cfg.ds.cave_config is None
    assert any("workload_identity.ksa" in n for n in cfg.compat_notes)
    validate_config_renders(cfg)
    m = render_job(cfg, "meshing", 3, run_id="r", parallelism=1)
    container = m["spec"]["template"]["spec"]["containers"][0]
    assert (
        container["image"] == cfg.images["meshing"] == "caveconnectome/pychunkedgraph:v3.2.0.dev6"
    )
    assert container["command"] == ["python", "-m", "pychunkedgraph.pipeline.meshing"]


def _write(tmp_path: Path, dataset: dict) -> Path:
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(dataset))
    pipeline = {**NEW, "dataset": "dataset.yml", "images": {"pcg": PCG}}
    (tmp_path / "pipeline.yml").write_text(yaml.safe_dump(pipeline))
    return tmp_path / "pipeline.yml"


GRAPH = {"CHUNK_SIZE": [64, 64, 64]}


@pytest.mark.parametrize(
    "watershed", ["gs://bucket/ws", "precomputed://https://host/ws", "file://./missing"]
)
def test_an_unreadable_grid_names_data_source_size(tmp_path, watershed):
    path = _write(tmp_path, {"data_source": {"WATERSHED": watershed}, "graph_config": GRAPH})
    with pytest.raises(ConfigError, match=r"data_source\.size: the grid cannot be read"):
        load_config(path)


def test_data_source_size_must_agree_with_a_readable_watershed(tmp_path):
    (tmp_path / "ws").mkdir()
    info = {"scales": [{"size": [640, 640, 64]}]}
    (tmp_path / "ws" / "info").write_text(json.dumps(info))
    source = {"WATERSHED": "file://./ws"}
    assert load_config(
        _write(tmp_path, {"data_source": source, "graph_config": GRAPH})
    ).layer2_shape() == (10, 10, 1)
    same = {"data_source": {**source, "size": [640, 640, 64]}, "graph_config": GRAPH}
    assert load_config(_write(tmp_path, same)).layer2_shape() == (10, 10, 1)
    # A size that disagrees with the info file is refused, naming both.
    sized = {"data_source": {**source, "size": [128, 128, 128]}, "graph_config": GRAPH}
    with pytest.raises(ConfigError, match=r"\[128, 128, 128\] disagrees .*\[640, 640, 64\]"):
        load_config(_write(tmp_path, sized))
    # Without a readable info file the size stands (the way out when there is no network).
    (tmp_path / "ws" / "info").unlink()
    assert load_config(_write(tmp_path, sized)).layer2_shape() == (2, 2, 2)


def test_lower_case_typos_in_data_source_are_refused(tmp_path):
    dataset = {"data_source": {"size": [64] * 3, "watershd": "x"}, "graph_config": GRAPH}
    with pytest.raises(ConfigError, match="watershd"):
        load_config(_write(tmp_path, dataset))


@pytest.mark.parametrize(
    ("info", "ok"),
    [
        ({"scales": [{"size": [1, 2, 3]}, {"size": [1, 1, 1]}]}, (1, 2, 3)),
        ({"scales": []}, None),
        ({"scales": [{"size": [1, 2]}]}, None),
        ({"scales": [{"size": [0, 2, 3]}]}, None),
        ({}, None),
    ],
)
def test_size_from_info(info, ok):
    if ok is None:
        with pytest.raises(GridUnreadable):
            size_from_info(info)
    else:
        assert size_from_info(info) == ok


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("file:///data/ws", Path("/data/ws/info")),
        ("file://./ws", Path("/base/ws/info")),
        ("precomputed://file:///data/ws", Path("/data/ws/info")),
        ("ws", Path("/base/ws/info")),
        ("gs://b/ws", None),
    ],
)
def test_local_info_path(url, expected):
    assert local_info_path(url, Path("/base")) == expected


def test_config_import_writes_the_new_shape(tmp_path):
    from click.testing import CliRunner

    from scripts.cli import main

    for name in ("pipeline.yml", "dataset.yml"):
        (tmp_path / name).write_text((EXAMPLE.parent / name).read_text())
    (tmp_path / "watershed").mkdir()
    (tmp_path / "watershed" / "info").write_text(
        (EXAMPLE.parent / "watershed" / "info").read_text()
    )
    runner = CliRunner(env={"COLUMNS": "400"})  # one line per row of the notes' table
    result = runner.invoke(main, ["config", "import", str(tmp_path / "pipeline.yml")])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "service_account" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells == [
        "workload_identity.service_account",
        "the worker pods' Kubernetes service account",
        "workload_identity.ksa",
        "renamed workload_identity.ksa (the same service account)",
    ]
    # What the predecessor's newest code changed since 0.0.4 is a row each.
    rows = {line.strip("│ ").split("│")[0].strip() for line in result.output.splitlines()}
    assert {
        "job.resources.pack",
        "job.processes_per_vcpu (omitted)",
        "(image pods) terminationGracePeriodSeconds",
        "env.PCG_PROFILER_ENABLED (omitted)",
        "env.PCG_HELD_MAX_WAIT_SEC (omitted)",
    } <= rows
    new = yaml.safe_load((tmp_path / "pipeline.new.yml").read_text())
    assert new["job"]["resources"]["pack"] is True  # the example's `pack: 1`
    assert new["job"]["processes_per_vcpu"] == 2  # omitted by the example: written out
    assert new["workload_identity"]["ksa"] == "pipeline" and "images" in new
    assert "pcg" not in new["images"] and new["dataset"] == "dataset.new.yml"
    dataset = yaml.safe_load((tmp_path / "dataset.new.yml").read_text())
    assert "WATERSHED" not in dataset["data_source"] and dataset["data_source"]["watershed"]
    cfg = load_config(tmp_path / "pipeline.new.yml")
    assert cfg.compat_notes == ()
    old = load_config(tmp_path / "pipeline.yml")
    # (the new dataset file is another file: its fingerprint differs, its meaning does not)
    keep = {"dataset", "source_path", "compat_notes", "dataset_config", "dataset_fingerprint"}
    assert cfg.model_dump(exclude=keep) == old.model_dump(exclude=keep)
    assert cfg.ds == old.ds
    again = runner.invoke(main, ["config", "import", str(tmp_path / "pipeline.yml")])
    assert again.exit_code == 2 and "--force" in again.output


def test_config_import_dash_o_is_not_stopped_by_an_earlier_default_import(tmp_path):
    """With -o FILE the dataset file is FILE's (`FILE.dataset.yml`): the `dataset.new.yml` of
    an earlier import without -o is neither overwritten nor in the way; what exists of what
    the operator named is refused, naming the file and --force."""
    from click.testing import CliRunner

    from scripts.cli import main

    for name in ("pipeline.yml", "dataset.yml"):
        (tmp_path / name).write_text((EXAMPLE.parent / name).read_text())
    (tmp_path / "watershed").mkdir()
    (tmp_path / "watershed" / "info").write_text(
        (EXAMPLE.parent / "watershed" / "info").read_text()
    )
    old, mine = str(tmp_path / "pipeline.yml"), tmp_path / "mine.yml"
    runner = CliRunner()
    assert runner.invoke(main, ["config", "import", old]).exit_code == 0
    earlier = (tmp_path / "dataset.new.yml").read_text()

    result = runner.invoke(main, ["config", "import", old, "-o", str(mine)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(mine.read_text())["dataset"] == "mine.dataset.yml"
    assert load_config(mine).ds == load_config(old).ds
    assert (tmp_path / "dataset.new.yml").read_text() == earlier  # untouched

    again = runner.invoke(main, ["config", "import", old, "-o", str(mine)])
    assert again.exit_code == 2
    assert again.stderr == f"error: {mine}: exists (named by -o); pass --force to overwrite it\n"
    mine.unlink()
    again = runner.invoke(main, ["config", "import", old, "-o", str(mine)])
    assert again.exit_code == 2
    assert again.stderr == (
        f"error: {tmp_path / 'mine.dataset.yml'}: exists (the dataset file written beside -o "
        f"{mine}); pass --force to overwrite it\n"
    )
    forced = runner.invoke(main, ["config", "import", old, "-o", str(mine), "--force"])
    assert forced.exit_code == 0, forced.output
