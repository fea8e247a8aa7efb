"""shared.config.compute_class: only pod-billed compute classes load, and a refusal names the
field and the reason (issue 26)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.config.compute_class import ComputeClass, ComputeClassError, check_compute_class
from shared.config.config import ConfigError
from shared.config.config_files import load_config

NODE_BILLED = "billed per node plus a management premium"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ComputeClass.DEFAULT),
        (None, ComputeClass.DEFAULT),  # `compute_class:` with nothing under it
        ("general-purpose", ComputeClass.DEFAULT),  # the default's own name: no selector
        ("General-Purpose", ComputeClass.DEFAULT),
        ("Balanced", ComputeClass.BALANCED),
        ("Scale-Out", ComputeClass.SCALE_OUT),
    ],
)
def test_pod_billed_classes_load(value, expected):
    assert check_compute_class(value) == expected.value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("Performance", NODE_BILLED),
        ("Accelerator", NODE_BILLED),
        ("autopilot-spot", NODE_BILLED),  # GKE's own custom ComputeClass
        ("pcg-spot-first", NODE_BILLED),  # an operator's ComputeClass: podFamily unknowable
        ("balanced", "spelt 'Balanced'"),  # the selector is case-sensitive
        ("scale-out", "spelt 'Scale-Out'"),
        (5, "not a class name"),
    ],
)
def test_node_billed_classes_are_refused_with_the_reason(value, reason):
    with pytest.raises(ComputeClassError, match=reason):
        check_compute_class(value)


DATASET = {"data_source": {"size": [512, 512, 128]}, "graph_config": {"CHUNK_SIZE": [64, 64, 64]}}


def _load(tmp_path: Path, job: dict, predecessor: bool = False):
    pipeline = {
        "graph_id": "g",
        "dataset": "dataset.yml",
        "bigtable": {"project": "p", "instance": "i"},
        "job": job,
    }
    if predecessor:
        pipeline["workload"] = "ingest"
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(DATASET))
    (tmp_path / "pipeline.yml").write_text(yaml.safe_dump(pipeline))
    return load_config(tmp_path / "pipeline.yml")


@pytest.mark.parametrize("predecessor", [False, True])
@pytest.mark.parametrize(
    ("job", "field"),
    [
        ({"compute_class": "Performance"}, "job.compute_class: 'Performance' is billed per node"),
        (
            {"workloads": {"meshing": {"compute_class": "Accelerator"}}},
            "job.workloads.meshing.compute_class: 'Accelerator' is billed per node",
        ),
    ],
)
def test_the_config_error_names_the_field(tmp_path, job, field, predecessor):
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, job, predecessor)
    assert field in str(exc.value)
    assert "Use one of '', 'Balanced', 'Scale-Out'" in str(exc.value)


def test_a_pod_billed_class_loads(tmp_path):
    cfg = _load(tmp_path, {"compute_class": "Scale-Out", "workloads": {"meshing": {}}})
    assert cfg.job.for_stage("meshing").compute_class == "Scale-Out"
