"""The tables a config's stages need (scripts/run_tables.py): the graph's, made by `pipeline
setup` unless an image's ingest setup owns it, and the tables a stage's plugin declares
(the demo's l2cache and meshing passes), none for a stage run by an image."""

from __future__ import annotations

import pytest

from scripts.run_tables import StageTable, extra_tables, stage_tables
from shared.config.config import ConfigError
from shared.config.config_files import load_config
from tests.builders.stored_runs import DEMO

ALL = ["ingest", "l2cache", "meshing"]


@pytest.fixture(scope="module")
def demo():
    return load_config(DEMO)


def test_the_demos_passes_write_tables_of_their_own(demo):
    assert stage_tables(demo, ALL) == [
        StageTable("demo", "ingest"),
        StageTable("demo-l2cache", "l2cache"),
        StageTable("demo-meshes", "meshing"),
    ]
    assert extra_tables(demo, ["ingest", "meshing"]) == [StageTable("demo-meshes", "meshing")]
    assert stage_tables(demo, ["ingest"]) == [StageTable("demo", "ingest")]


def test_an_image_makes_its_own_tables(demo):
    image = demo.model_copy(
        update={
            "commands": {"ingest": ["python", "-m", "x"], "l2cache": ["python", "-m", "y"]},
            "workloads": {"meshing": demo.workloads["meshing"]},
        }
    )
    assert stage_tables(image, ALL) == [
        StageTable("demo", "ingest", ours=False),
        StageTable("demo-meshes", "meshing"),
    ]


def test_a_plugin_without_tables_declares_none(demo):
    plain = demo.model_copy(update={"workloads": {**demo.workloads, "l2cache": "json:dumps"}})
    assert extra_tables(plain, ALL) == [StageTable("demo-meshes", "meshing")]


def test_a_plugin_that_cannot_be_imported_names_its_key(demo):
    broken = demo.model_copy(update={"workloads": {**demo.workloads, "l2cache": "no_such.mod:f"}})
    with pytest.raises(ConfigError, match=r"workloads\.l2cache: cannot import no_such\.mod"):
        stage_tables(broken, ALL)
