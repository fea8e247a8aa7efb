"""The dataset file's fingerprint (shared/operate/dataset_changes.py): which dataset changes
since a run started can take effect, `pipeline apply`'s and a re-submit's refusals naming the
keys, and a run stored before fingerprints were recorded (nothing compared)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config.config_files import config_from_dict, fingerprint, load_config
from shared.operate.config_versions import apply_config, diff
from shared.operate.dataset_changes import (
    DatasetChangedError,
    can_take_effect,
    check_apply,
    check_resubmit,
    dataset_drift,
    recorded_fingerprint,
)
from shared.operate.mesh_settings import MeshSettingsInGraphError
from shared.reconcile.build_plan import new_run
from tests.builders.stored_runs import NOW

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
CFG = load_config(DEMO)
# An image-run ingest (PyChunkedGraph's: its setup writes the dataset into the graph).
IMAGE = CFG.model_copy(update={"commands": {"ingest": ["python", "-m", "pcg_ingest"]}})


def edited(cfg=CFG, fp="f-new", **dataset):
    """`cfg` with dataset blocks replaced, as loaded from a file of fingerprint `fp`."""
    return cfg.model_copy(
        update={"dataset_config": cfg.ds.model_copy(update=dataset), "dataset_fingerprint": fp}
    )


def run_of(cfg=CFG, stages=("ingest",), fp="f-start"):
    run = new_run(
        cfg.model_copy(update={"dataset_fingerprint": fp}), "r1", list(stages), "auto", NOW
    )
    return run


SEED = {"ingest_config": {"seed": 8}}
MESH = {"mesh_config": CFG.ds.mesh_config.model_copy(update={"max_layer": 3})}


def test_the_fingerprint_is_of_the_files_bytes_and_loading_records_it():
    assert fingerprint(b"a") == fingerprint(b"a") != fingerprint(b"a ")
    assert len(fingerprint(b"")) == 16
    dataset = DEMO.parent / "dataset.yml"
    assert CFG.dataset_fingerprint == fingerprint(dataset.read_text().encode())
    assert run_of(CFG, fp=CFG.dataset_fingerprint).config["dataset_fingerprint"] == (
        CFG.dataset_fingerprint
    )


@pytest.mark.parametrize(
    ("cfg", "stages", "setup_phase", "key", "effective"),
    [
        # our worker reads the run's dataset in every pod
        (CFG, ("ingest",), None, "dataset.ingest_config.seed", True),
        (CFG, ("ingest", "l2cache"), None, "dataset.l2cache_config.x", True),
        # an image reads the graph its setup wrote
        (IMAGE, ("ingest",), None, "dataset.ingest_config.seed", False),
        (IMAGE, ("ingest", "l2cache"), None, "dataset.l2cache_config.x", False),
        # mesh settings: until the meshing setup ran (shared.operate.mesh_settings)
        (CFG, ("ingest", "meshing"), "waiting", "dataset.mesh_config.max_layer", True),
        (CFG, ("ingest", "meshing"), "succeeded", "dataset.mesh_config.max_layer", False),
        (CFG, ("ingest", "meshing"), "running", "dataset.mesh_config.max_layer", False),
    ],
)  # fmt: skip
def test_which_dataset_changes_can_take_effect(cfg, stages, setup_phase, key, effective):
    run = run_of(cfg, stages)
    if setup_phase is not None:
        run.setups["meshing"].phase = setup_phase
    assert can_take_effect(run, cfg, key) is effective


@pytest.mark.parametrize(
    ("recorded", "current", "changed"),
    [("f-start", "f-start", False), ("", "f-new", False), ("f-start", "", False),
     ("f-start", "f-new", True)],
)  # fmt: skip
def test_only_a_recorded_fingerprint_that_differs_is_a_change(recorded, current, changed):
    run = run_of(fp=recorded)
    new = edited(fp=current, **SEED)
    drift = dataset_drift(run, new, diff(CFG, new))
    assert drift.changed is changed
    assert [c.key for c in drift.effective] == (["dataset.ingest_config.seed"] if changed else [])


def test_apply_refuses_an_image_runs_dataset_change_naming_the_keys_forced_or_not():
    run = run_of(IMAGE)
    new = edited(IMAGE, **SEED)
    for force in (False, True):
        with pytest.raises(DatasetChangedError, match=r"dataset.ingest_config.seed 7 -> 8"):
            apply_config(run, new, diff(IMAGE, new), force, "bob", NOW)
    assert run.config_version == 1 and run.dataset["ingest_config"] == {"seed": 7}


def test_apply_takes_in_a_change_that_can_take_effect_and_records_the_new_fingerprint():
    run = run_of(CFG)
    new = edited(**SEED)
    apply_config(run, new, diff(CFG, new), False, "bob", NOW)
    assert run.dataset["ingest_config"] == {"seed": 8}
    assert recorded_fingerprint(run) == "f-new"


def test_a_mesh_change_after_the_meshing_setup_is_the_mesh_refusal():
    run = run_of(CFG, ("ingest", "meshing"))
    run.setups["meshing"].phase = "succeeded"
    new = edited(**MESH)
    with pytest.raises(MeshSettingsInGraphError):
        apply_config(run, new, diff(CFG, new), True, "bob", NOW)


def test_an_unchanged_file_or_a_change_of_no_meaning_passes():
    run = run_of(IMAGE)
    check_apply(run, IMAGE.model_copy(update={"dataset_fingerprint": "f-start"}), [])
    reformatted = edited(IMAGE)  # another fingerprint, the same dataset
    assert diff(IMAGE, reformatted) == []
    check_apply(run, reformatted, [])
    check_resubmit(run, reformatted, [])


def test_a_resubmit_refuses_any_change_saying_which_to_apply_and_which_to_revert():
    run = run_of(CFG)
    new = edited(**SEED)
    with pytest.raises(DatasetChangedError) as e:
        check_resubmit(run, new, diff(CFG, new))
    assert "dataset.ingest_config.seed 7 -> 8 can take effect: `pipeline apply r1`" in str(e.value)
    assert "f-start -> f-new" in str(e.value)
    image = run_of(IMAGE)
    new = edited(IMAGE, **SEED)
    with pytest.raises(DatasetChangedError, match=r"seed 7 -> 8 cannot take effect.*revert"):
        check_resubmit(image, new, diff(IMAGE, new))


def test_a_run_stored_before_fingerprints_loads_and_compares_nothing():
    run = run_of(IMAGE)
    del run.config["dataset_fingerprint"]  # an older document
    assert config_from_dict(run.config, run.dataset).dataset_fingerprint == ""
    assert recorded_fingerprint(run) == ""
    new = edited(IMAGE, **SEED)
    check_resubmit(run, new, diff(IMAGE, new))
    apply_config(run, new, diff(IMAGE, new), False, "bob", NOW)  # as before fingerprints
    assert run.dataset["ingest_config"] == {"seed": 8}
