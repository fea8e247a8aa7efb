"""shared.operate.mesh_settings: after the meshing setup wrote mesh_config into the graph,
`pipeline apply` refuses a mesh_config change (naming the keys, saying the setup must be
re-run), forced or not; before it, the change is applied and says when it takes effect."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config.config import MeshConfig
from shared.config.config_files import load_config
from shared.operate.config_versions import AT_MESH_SETUP, apply_config, diff
from shared.operate.mesh_settings import (
    MeshSettingsInGraphError,
    is_mesh_key,
    meshing_setup_ran,
)
from shared.reconcile.build_plan import new_run
from tests.builders.stored_runs import NOW

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"
CFG = load_config(DEMO)


def _with_mesh(**mesh) -> object:
    ds = CFG.ds.model_copy(update={"mesh_config": MeshConfig(**mesh)})
    return CFG.model_copy(update={"dataset_config": ds})


@pytest.mark.parametrize(
    ("key", "mesh"),
    [
        ("dataset.mesh_config.mip", True),
        ("dataset.mesh_config.max_layer", True),
        ("dataset.mesh_config", True),  # added or removed as a whole
        ("dataset.mesh_configs.x", False),
        ("dataset.l2cache_config.cv_path", False),
        ("config.job.ramp.max", False),
    ],
)
def test_is_mesh_key(key, mesh):
    assert is_mesh_key(key) is mesh


@pytest.mark.parametrize(
    ("stages", "setup_phase", "ran"),
    [
        (["ingest", "meshing"], "waiting", False),
        (["ingest", "meshing"], "failed", False),  # a re-submit re-runs it with the new values
        (["ingest", "meshing"], "running", True),  # its pod may have read the old ones
        (["ingest", "meshing"], "succeeded", True),
        (["ingest", "meshing"], None, True),  # dropped by --from-layer: it ran before
        (["ingest"], None, False),  # no meshing in this run
    ],
)
def test_meshing_setup_ran(stages, setup_phase, ran):
    run = new_run(CFG, "r1", stages, "auto", NOW)
    if setup_phase is None:
        run.setups.pop("meshing", None)
    else:
        run.setups["meshing"].phase = setup_phase
    assert meshing_setup_ran(run, CFG) is ran


def test_a_meshing_stage_without_a_setup_pass_is_not_refused():
    cfg = CFG.model_copy(update={"commands": {**CFG.commands, "meshing_setup": []}})
    run = new_run(cfg, "r1", ["ingest", "meshing"], "auto", NOW)
    run.setups.pop("meshing", None)
    assert meshing_setup_ran(run, cfg) is False


@pytest.mark.parametrize("force", [False, True])
def test_apply_refuses_mesh_changes_once_the_setup_ran(force):
    run = new_run(CFG, "r1", ["ingest", "meshing"], "auto", NOW)
    new = _with_mesh(max_layer=3, mip=2)
    changes = diff(CFG, new)
    assert {c.key: c.when for c in changes} == {
        "dataset.mesh_config.max_layer": AT_MESH_SETUP,
        "dataset.mesh_config.mip": AT_MESH_SETUP,
    }
    run.setups["meshing"].phase = "succeeded"
    with pytest.raises(MeshSettingsInGraphError) as refused:
        apply_config(run, new, changes, force, "ana", NOW)
    message = str(refused.value)
    assert "dataset.mesh_config.max_layer 4 -> 3" in message
    assert "dataset.mesh_config.mip None -> 2" in message
    assert "re-run the meshing setup" in message and "no effect" in message
    assert run.config_version == 1  # nothing stored


def test_before_the_setup_ran_a_mesh_change_is_applied():
    run = new_run(CFG, "r1", ["ingest", "meshing"], "auto", NOW)
    new = _with_mesh(max_layer=3)
    entry = apply_config(run, new, diff(CFG, new), False, "ana", NOW)
    assert entry["changes"] == [
        {"key": "dataset.mesh_config.max_layer", "old": 4, "new": 3, "when": AT_MESH_SETUP}
    ]
    assert run.dataset["mesh_config"]["max_layer"] == 3
