"""What a stage is: the one table every other place asks (dependencies, layers, defaults)."""

from __future__ import annotations

import pytest

from shared.model.stages import DEFAULT_COMMAND, STAGE_NAMES, STAGES, PlanError, dependencies, stage


def test_the_stages_in_dag_order():
    assert STAGE_NAMES == ("ingest", "l2cache", "meshing", "migrate", "migrate_cleanup")
    for name in STAGE_NAMES:  # a stage never waits for one listed after it
        assert all(STAGE_NAMES.index(d) < STAGE_NAMES.index(name) for d in dependencies(name))


@pytest.mark.parametrize(
    ("name", "deps", "last", "block", "default"),
    [
        ("ingest", (), "root", None, True),
        ("l2cache", ("ingest",), "layer2", "l2cache_config", True),
        ("meshing", ("ingest",), "mesh", "mesh_config", True),
        # cave-pipeline 0.0.4's stages.py: the cleanup pass after the migration
        ("migrate", (), "root", None, False),
        ("migrate_cleanup", ("migrate",), "root", None, False),
    ],
)
def test_stage_table(name, deps, last, block, default):
    s = STAGES[name]
    assert (s.depends_on, s.last_layer, s.dataset_block, s.in_default_build) == (
        deps,
        last,
        block,
        default,
    )


def test_an_unknown_stage_lists_the_known_ones():
    with pytest.raises(PlanError, match="unknown stage 'mesh': expected ingest, l2cache"):
        stage("mesh")


def test_the_default_command_is_the_worker():
    assert DEFAULT_COMMAND == ("python", "-m", "worker")
